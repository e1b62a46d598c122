package fencing

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/store"
)

// DrainChannel is the Postgres NOTIFY channel on which DrainDevice
// announces a drain (payload: the device's id), from inside its
// transaction; whichever gateway holds the device's session sends it the
// drain frame and clears the request. A device connected nowhere gets it
// after its next hello.
const DrainChannel = "rendermac_drain"

// ErrDeviceRevoked is a device action on a revoked device.
var ErrDeviceRevoked = errors.New("server: device revoked")

const (
	sqlRequestDrain = `
UPDATE devices SET drain_requested_at = coalesce($2::timestamptz, now())
WHERE id = $1 AND status <> 'revoked'`

	sqlDeviceStatus = `SELECT status FROM devices WHERE id = $1`

	sqlRevokeDeviceLive = `UPDATE devices SET status = 'revoked' WHERE id = $1 AND status <> 'revoked'`

	sqlDeviceEvent = `
INSERT INTO device_events (device_id, action, actor, operator_id, at)
VALUES ($1, $2, 'operator', $3, coalesce($4::timestamptz, now()))`
)

// DrainDevice records an operator's drain of a device and announces it on
// DrainChannel, in one transaction with the device's journal row (actor
// operator, naming operatorID): the gateway holding the device's session
// tells the agent to take no more offers and let its running attempts
// finish, and offers that session nothing more. A revoked device is
// ErrDeviceRevoked, a missing one ErrNotFound; draining twice is allowed
// (the agent ignores a second drain).
func (s *Service) DrainDevice(ctx context.Context, now time.Time, operatorID, deviceID string) error {
	return s.deviceAction(ctx, now, operatorID, deviceID, "drain", sqlRequestDrain, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, store.SQLNotify, DrainChannel, deviceID)
		return err
	})
}

// RevokeDeviceByOperator is RevokeDevice from the console: the device is
// revoked (no more leases, its sessions closed at their next hello, its
// token refused) with its journal row naming operatorID. Revoking a
// revoked device is ErrDeviceRevoked.
func (s *Service) RevokeDeviceByOperator(ctx context.Context, now time.Time, operatorID, deviceID string) error {
	return s.deviceAction(ctx, now, operatorID, deviceID, "revoke", sqlRevokeDeviceLive, nil)
}

// deviceAction runs update on the device (which must hit it unless it is
// revoked), journals action by the operator and runs then, all in one
// transaction.
func (s *Service) deviceAction(ctx context.Context, now time.Time, operatorID, deviceID, action, update string,
	then func(pgx.Tx) error) error {
	if !protocol.ValidID(operatorID) {
		return fmt.Errorf("%s device %s: operator id %q is not a uuid", action, deviceID, operatorID)
	}
	if !protocol.ValidID(deviceID) {
		return fmt.Errorf("%s device %s: %w", action, deviceID, ErrNotFound)
	}
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
		args := []any{deviceID}
		if action == "drain" {
			args = append(args, store.NowArg(now))
		}
		tag, err := tx.Exec(ctx, update, args...)
		if err != nil {
			return err
		}
		if tag.RowsAffected() != 1 {
			var status string
			switch err := tx.QueryRow(ctx, sqlDeviceStatus, deviceID).Scan(&status); {
			case errors.Is(err, pgx.ErrNoRows):
				return ErrNotFound
			case err != nil:
				return err
			}
			return ErrDeviceRevoked
		}
		if _, err := tx.Exec(ctx, sqlDeviceEvent, deviceID, action, operatorID, store.NowArg(now)); err != nil {
			return err
		}
		if then != nil {
			return then(tx)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("%s device %s: %w", action, deviceID, err)
	}
	return nil
}
