package fencing

import (
	"context"
	"fmt"

	"github.com/rendermac/rendermac/protocol"
)

const (
	sqlInsertBuyer = `
INSERT INTO buyers (id, name, balance_cents, captured_cents, initial_cents) VALUES ($1, $2, $3, 0, $3)`

	// A new device is offline and never seen until its first lease or
	// progress; an empty token hash means "not paired yet".
	sqlInsertDevice = `
INSERT INTO devices (id, name, token_hash, services, slots_total, status)
VALUES ($1, $2, nullif($3, ''), $4, $5, 'offline')`

	sqlRevokeDevice = `UPDATE devices SET status = 'revoked' WHERE id = $1`
)

// CreateBuyer adds a buyer with an opening balance. The balance is also
// kept as the buyer's initial_cents, which invariant 7 (conservation of
// balance + holds + captures) is checked against.
func (s *Service) CreateBuyer(ctx context.Context, id, name string, balanceCents int64) error {
	if !protocol.ValidID(id) {
		return fmt.Errorf("create buyer: id %q is not a lowercase uuid", id)
	}
	if _, err := s.pool.Exec(ctx, sqlInsertBuyer, id, name, balanceCents); err != nil {
		return fmt.Errorf("create buyer %s: %w", id, err)
	}
	return nil
}

// CreateDevice adds a device offering services with slotsTotal slots.
// tokenHash is the hash of its bearer token ("" for a device not paired yet).
func (s *Service) CreateDevice(ctx context.Context, id, name string, services []string, slotsTotal int, tokenHash string) error {
	if !protocol.ValidID(id) {
		return fmt.Errorf("create device: id %q is not a lowercase uuid", id)
	}
	if services == nil {
		services = []string{}
	}
	if _, err := s.pool.Exec(ctx, sqlInsertDevice, id, name, tokenHash, services, slotsTotal); err != nil {
		return fmt.Errorf("create device %s: %w", id, err)
	}
	return nil
}

// RevokeDevice revokes a device: it gets no more leases (Lease replies
// not_found) and no heartbeat brings it back online. Its live attempts keep
// their fences; they end by fail, commit or the sweeper like any other.
func (s *Service) RevokeDevice(ctx context.Context, id string) error {
	if !protocol.ValidID(id) {
		return fmt.Errorf("revoke device %s: %w", id, ErrNotFound)
	}
	tag, err := s.pool.Exec(ctx, sqlRevokeDevice, id)
	if err != nil {
		return fmt.Errorf("revoke device %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("revoke device %s: %w", id, ErrNotFound)
	}
	return nil
}
