package api

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rendermac/rendermac/protocol"
)

// Pairing limits.
const (
	pairBodyBytes   = 64 << 10
	maxDeviceName   = 128
	maxPairServices = 16
	// deviceTokenBytes is the entropy of a device token.
	deviceTokenBytes = 32
	// deviceTokenPrefix marks a device token; it is part of the secret
	// string that is hashed.
	deviceTokenPrefix = "rmd_"
)

const (
	sqlNow = `SELECT coalesce($1::timestamptz, now())`

	// The code row is locked first, so two devices presenting one code
	// serialise here and the second sees it used.
	sqlLockPairingCode = `
SELECT used_at IS NULL AND expires_at > $2 FROM pairing_codes WHERE code_hash = $1 FOR UPDATE`

	// A paired device starts offline with one slot; its hello sets the
	// real slot count and services for the session.
	sqlInsertPairedDevice = `
INSERT INTO devices (id, name, token_hash, services, slots_total, status, created_at)
VALUES ($1, $2, $3, $4, 1, 'offline', $5)`

	sqlUsePairingCode = `
UPDATE pairing_codes SET used_at = $2, device_id = $3 WHERE code_hash = $1 AND used_at IS NULL`
)

// errBadPairingCode covers unknown, used and expired codes alike, so the
// answer does not tell a guesser which codes exist.
var errBadPairingCode = errors.New("unknown, used or expired pairing code")

type pairBody struct {
	Code     string   `json:"code"`
	Name     string   `json:"name"`
	Services []string `json:"services"`
}

// pairReply is returned once: the device token is never shown again.
type pairReply struct {
	DeviceID    string `json:"device_id"`
	DeviceToken string `json:"device_token"`
}

// pair is POST /v1/provider/pair: it redeems a single-use pairing code for
// a new device and its bearer token (201), or refuses with 401
// invalid_pairing_code, 422 validation_error.
func (a *API) pair(w http.ResponseWriter, r *http.Request) {
	var body pairBody
	if rerr := decodeJSON(w, r, pairBodyBytes, &body); rerr != nil {
		rerr.write(w)
		return
	}
	if rerr := a.checkPair(&body); rerr != nil {
		rerr.write(w)
		return
	}
	token, tokenHash, err := newSecret(deviceTokenPrefix, deviceTokenBytes)
	if err != nil {
		a.internal(w, r, err)
		return
	}
	deviceID := protocol.UUIDFrom(rand.Reader)
	err = a.redeem(r.Context(), HashSecret(NormalizePairingCode(body.Code)), deviceID, body, tokenHash)
	switch {
	case errors.Is(err, errBadPairingCode):
		writeError(w, http.StatusUnauthorized, CodeInvalidPairingCode, err.Error())
	case err != nil:
		a.internal(w, r, err)
	default:
		a.log.InfoContext(r.Context(), "device paired", "device_id", deviceID, "name", body.Name, "services", body.Services)
		w.Header().Set("Cache-Control", "no-store")
		writeJSON(w, http.StatusCreated, pairReply{DeviceID: deviceID, DeviceToken: token})
	}
}

// checkPair validates a pairing request's fields in place (the name is
// trimmed, services deduplicated).
func (a *API) checkPair(b *pairBody) *requestError {
	b.Name = strings.TrimSpace(b.Name)
	switch {
	case strings.TrimSpace(b.Code) == "" || len(b.Code) > 64:
		return invalid("code", "code must be 1..64 characters")
	case b.Name == "" || len(b.Name) > maxDeviceName:
		return invalid("name", "name must be 1..%d bytes", maxDeviceName)
	case len(b.Services) == 0 || len(b.Services) > maxPairServices:
		return invalid("services", "services must name 1..%d services", maxPairServices)
	}
	for _, s := range b.Services {
		if !slices.ContainsFunc(a.cfg.Services, func(sv protocol.Service) bool { return sv.Name == s }) {
			return invalid("services", "unknown service %q", s)
		}
	}
	slices.Sort(b.Services)
	b.Services = slices.Compact(b.Services)
	return nil
}

// redeem consumes the code and inserts the device in one transaction:
// either both happen or neither, so a failed pairing leaves the code usable.
func (a *API) redeem(ctx context.Context, codeHash, deviceID string, b pairBody, tokenHash string) error {
	return pgx.BeginTxFunc(ctx, a.pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
		var now time.Time
		if err := tx.QueryRow(ctx, sqlNow, nullTime(a.pinned())).Scan(&now); err != nil {
			return fmt.Errorf("read clock: %w", err)
		}
		var usable bool
		err := tx.QueryRow(ctx, sqlLockPairingCode, codeHash, now).Scan(&usable)
		if errors.Is(err, pgx.ErrNoRows) || (err == nil && !usable) {
			return errBadPairingCode
		}
		if err != nil {
			return fmt.Errorf("lock pairing code: %w", err)
		}
		if _, err := tx.Exec(ctx, sqlInsertPairedDevice, deviceID, b.Name, tokenHash, b.Services, now); err != nil {
			return fmt.Errorf("insert device: %w", err)
		}
		tag, err := tx.Exec(ctx, sqlUsePairingCode, codeHash, now, deviceID)
		if err != nil {
			return fmt.Errorf("use pairing code: %w", err)
		}
		if tag.RowsAffected() != 1 {
			return fmt.Errorf("use pairing code: locked code matched %d rows", tag.RowsAffected())
		}
		return nil
	})
}

// nullTime is t as a query argument, with the zero time as SQL NULL (the
// database clock).
func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}
