package loadgen

import (
	"context"
	"crypto/rand"
	"encoding/hex"

	"github.com/rendermac/rendermac/protocol"
)

// Device is a synthetic device's identity: its id and the bearer token it
// dials the gateway with (the server stores only its hash).
type Device struct{ ID, Token string }

// NewDevice draws a fresh device id and a random token that starts with
// prefix (which names the tool in the server's logs, e.g. "rmbench_").
func NewDevice(prefix string) (Device, error) {
	tok := make([]byte, 24)
	if _, err := rand.Read(tok); err != nil {
		return Device{}, err
	}
	return Device{ID: protocol.UUIDFrom(rand.Reader), Token: prefix + hex.EncodeToString(tok)}, nil
}

// Registrar creates device rows: *fencing.Service does.
type Registrar interface {
	CreateDevice(ctx context.Context, id, name string, services []string, slotsTotal int, tokenHash string) error
}

// Register creates d's row through r, offering services with slots slots.
func (d Device) Register(ctx context.Context, r Registrar, name string, services []string, slots int) error {
	return r.CreateDevice(ctx, d.ID, name, services, slots, protocol.HashCommitToken(d.Token))
}
