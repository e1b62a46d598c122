package api

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/protocol/buyer"
	"github.com/rendermac/rendermac/server/ratelimit"
	"github.com/rendermac/rendermac/server/store"
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
	// The code row is locked first, so two devices presenting one code
	// serialise here and the second sees it used. A code with an id is
	// found by its id (so that a wrong secret can be counted against it);
	// one minted before ids existed only by its hash.
	sqlLockPairingCode = `
SELECT code_hash, used_at IS NULL AND burned_at IS NULL AND expires_at > $3
FROM pairing_codes WHERE code_id = $1 OR (code_id IS NULL AND code_hash = $2) FOR UPDATE`

	// A wrong secret at a live code's id counts; the max-th burns it.
	sqlWrongPairingGuess = `
UPDATE pairing_codes SET wrong_guesses = wrong_guesses + 1,
       burned_at = CASE WHEN wrong_guesses + 1 >= $2 THEN $3::timestamptz END
WHERE code_hash = $1 RETURNING code_id, burned_at IS NOT NULL`

	// A paired device starts offline with one slot; its hello sets the
	// real slot count and services for the session.
	sqlInsertPairedDevice = `
INSERT INTO devices (id, name, token_hash, services, slots_total, status, created_at)
VALUES ($1, $2, $3, $4, 1, 'offline', $5)`

	sqlUsePairingCode = `
UPDATE pairing_codes SET used_at = $2, device_id = $3 WHERE code_hash = $1 AND used_at IS NULL`
)

// errBadPairingCode covers unknown, used, expired, burned and wrong codes
// alike, so the answer does not tell a guesser which codes exist.
var errBadPairingCode = errors.New("unknown, used, expired or burned pairing code")

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
// invalid_pairing_code, 422 validation_error, or 429 rate_limited past the
// client IP's PairPerIP (every request counts, before the body is read).
func (a *API) pair(w http.ResponseWriter, r *http.Request) {
	if ok, wait := a.limits.pair.Allow(ratelimit.IPKey(r.RemoteAddr)); !ok {
		a.refuse(w, limitPair, "pairing attempts from this address", wait)
		return
	}
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
	err = a.redeem(r.Context(), NormalizePairingCode(body.Code), deviceID, body, tokenHash)
	switch {
	case errors.Is(err, errBadPairingCode):
		writeError(w, http.StatusUnauthorized, buyer.CodeInvalidPairingCode, err.Error())
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
// A wrong secret at an existing code's id is the exception: it commits a
// wrong guess against that code (burning it at PairMaxGuesses) and then
// answers errBadPairingCode like every other refusal.
func (a *API) redeem(ctx context.Context, code, deviceID string, b pairBody, tokenHash string) error {
	codeHash := HashSecret(code)
	codeID := ""
	if len(code) == pairingCodeLen {
		codeID = code[:pairingIDLen]
	}
	var wrong bool
	err := pgx.BeginTxFunc(ctx, a.pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
		now, err := store.ResolveNow(ctx, tx, a.pinned())
		if err != nil {
			return fmt.Errorf("read clock: %w", err)
		}
		var storedHash string
		var usable bool
		err = tx.QueryRow(ctx, sqlLockPairingCode, codeID, codeHash, now).Scan(&storedHash, &usable)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return errBadPairingCode
		case err != nil:
			return fmt.Errorf("lock pairing code: %w", err)
		case subtle.ConstantTimeCompare([]byte(storedHash), []byte(codeHash)) != 1:
			if !usable {
				return errBadPairingCode // a dead code needs no more counting
			}
			wrong = true
			return a.wrongGuess(ctx, tx, storedHash, now)
		case !usable:
			return errBadPairingCode
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
	if err == nil && wrong {
		return errBadPairingCode
	}
	return err
}

// wrongGuess counts a wrong secret against the locked code storedHash and
// burns it at PairMaxGuesses. The code's id is logged (it is not the
// secret), so an operator can tell why a code stopped working.
func (a *API) wrongGuess(ctx context.Context, tx pgx.Tx, storedHash string, now time.Time) error {
	var codeID string
	var burned bool
	if err := tx.QueryRow(ctx, sqlWrongPairingGuess, storedHash, a.cfg.PairMaxGuesses, now).Scan(&codeID, &burned); err != nil {
		return fmt.Errorf("count wrong pairing guess: %w", err)
	}
	if burned {
		a.log.WarnContext(ctx, "pairing code burned after wrong guesses", "code_id", codeID, "max_guesses", a.cfg.PairMaxGuesses)
	}
	return nil
}
