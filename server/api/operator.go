package api

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/store"
)

// Operator credentials: what `rendermac admin` mints. Each secret is
// returned once and stored only as HashSecret of it.

// SchemaVersion is the newest migration the API needs (00002: webhook_url
// and pairing_codes; 00003: pairing code ids and wrong-guess counts;
// 00005: attempts.encoder and verify_message; 00006: the console's operators
// and indexes; 00007: the live-attempt indexes on ended_at IS NULL, which
// the statements' store.SQLUnended is written for; 00009: jobs.withdrawn_count,
// which every lock of a job reads, and the attempt code offer_withdrawn;
// 00010: job_attempts.failure_message, which the job view reads; 00011:
// paused_services, which the matcher reads; 00012: job_events.operator_id
// and device_events, which console actions write);
// /readyz is not ready below it.
const SchemaVersion = 12

// pairingAlphabet has 32 symbols, so each draws exactly 5 random bits (no
// modulo bias), and leaves out 0, 1, I and O, which people misread.
const pairingAlphabet = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"

// A pairing code is pairingIDLen symbols of id (40 bits, stored in the
// clear so that a wrong guess at it can be counted against the code) and
// pairingSecretLen symbols of secret (80 bits): a secret cannot be guessed
// within the code's lifetime even without the guess bound.
const (
	pairingIDLen     = 8
	pairingSecretLen = 16
	pairingCodeLen   = pairingIDLen + pairingSecretLen
	// pairingIDTries bounds redraws of an id that is already taken.
	pairingIDTries = 5
)

// MaxPairingCodeTTL bounds a pairing code's lifetime: codes are for
// pairing a device now, not credentials to keep.
const MaxPairingCodeTTL = 24 * time.Hour

// API key format: a prefix plus 32 random bytes.
const (
	apiKeyPrefix = "rmk_"
	apiKeyBytes  = 32
)

const (
	sqlInsertAPIKey = `INSERT INTO api_keys (id, buyer_id, key_hash) VALUES ($1, $2, $3)`

	sqlInsertPairingCode = `
INSERT INTO pairing_codes (code_hash, code_id, created_at, expires_at)
SELECT $1, $4, t, t + $3::bigint * interval '1 microsecond' FROM (SELECT coalesce($2::timestamptz, now()) AS t) now
RETURNING expires_at`

	sqlSetWebhookURL = `UPDATE buyers SET webhook_url = nullif($2, '') WHERE id = $1`

	sqlListDevices = `
SELECT d.id::text, d.name, d.status, d.services, d.slots_total, d.last_seen_at, d.created_at,
       (SELECT count(*) FROM job_attempts a WHERE a.device_id = d.id
          AND a.` + store.SQLUnended + ` AND a.status IN ` + store.SQLLiveStatuses + `)
FROM devices d ORDER BY d.created_at, d.id`
)

// ErrUnknownBuyer is returned for a buyer id that names no buyer.
var ErrUnknownBuyer = errors.New("api: unknown buyer")

// CreateAPIKey mints an API key for buyerID and returns its plaintext,
// which is not stored and cannot be shown again.
func CreateAPIKey(ctx context.Context, pool *pgxpool.Pool, buyerID string) (string, error) {
	if !protocol.ValidID(buyerID) {
		return "", fmt.Errorf("create api key: %w %q", ErrUnknownBuyer, buyerID)
	}
	key, hash, err := newSecret(apiKeyPrefix, apiKeyBytes)
	if err != nil {
		return "", fmt.Errorf("create api key: %w", err)
	}
	if _, err := pool.Exec(ctx, sqlInsertAPIKey, protocol.UUIDFrom(rand.Reader), buyerID, hash); err != nil {
		if pe := (*pgconn.PgError)(nil); errors.As(err, &pe) && pe.Code == "23503" { // foreign_key_violation
			return "", fmt.Errorf("create api key: %w %s", ErrUnknownBuyer, buyerID)
		}
		return "", fmt.Errorf("create api key: %w", err)
	}
	return key, nil
}

// NormalizePairingCode is the form a code is hashed in: upper case, without
// the dashes and spaces people type, so "abcd-efgh" and "ABCDEFGH" agree.
func NormalizePairingCode(code string) string {
	return strings.Map(func(r rune) rune {
		if r == '-' || r == ' ' {
			return -1
		}
		return r
	}, strings.ToUpper(strings.TrimSpace(code)))
}

// CreatePairingCode mints a single-use pairing code valid for ttl (at most
// MaxPairingCodeTTL) from now (a zero now is the database clock) and
// returns it, formatted as XXXX-XXXX-SSSS-SSSS-SSSS-SSSS (the first two
// groups are the code's id), with its expiry.
func CreatePairingCode(ctx context.Context, pool *pgxpool.Pool, now time.Time, ttl time.Duration) (string, time.Time, error) {
	if ttl <= 0 || ttl > MaxPairingCodeTTL {
		return "", time.Time{}, fmt.Errorf("create pairing code: ttl %v must be positive and at most %v", ttl, MaxPairingCodeTTL)
	}
	for try := 1; ; try++ {
		code, err := drawPairingCode()
		if err != nil {
			return "", time.Time{}, fmt.Errorf("create pairing code: %w", err)
		}
		norm := NormalizePairingCode(code)
		var expires time.Time
		err = pool.QueryRow(ctx, sqlInsertPairingCode, HashSecret(norm), store.NowArg(now), ttl.Microseconds(), norm[:pairingIDLen]).Scan(&expires)
		if pe := (*pgconn.PgError)(nil); errors.As(err, &pe) && pe.Code == "23505" && try < pairingIDTries { // unique_violation: id taken
			continue
		}
		if err != nil {
			return "", time.Time{}, fmt.Errorf("create pairing code: %w", err)
		}
		return code, expires.UTC(), nil
	}
}

// drawPairingCode draws pairingCodeLen symbols from crypto/rand, grouped
// by four with dashes.
func drawPairingCode() (string, error) {
	raw := make([]byte, pairingCodeLen)
	if _, err := rand.Read(raw); err != nil {
		return "", err
	}
	var b strings.Builder
	for i, c := range raw {
		if i > 0 && i%4 == 0 {
			b.WriteByte('-')
		}
		b.WriteByte(pairingAlphabet[c%32]) // 256 is a multiple of 32: uniform
	}
	return b.String(), nil
}

// SetWebhookURL sets (or, with "", clears) the buyer's webhook endpoint. It
// must be an absolute http or https URL.
func SetWebhookURL(ctx context.Context, pool *pgxpool.Pool, buyerID, webhookURL string) error {
	if webhookURL != "" {
		u, err := url.Parse(webhookURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("set webhook url: %q is not an absolute http(s) URL", webhookURL)
		}
	}
	if !protocol.ValidID(buyerID) {
		return fmt.Errorf("set webhook url: %w %q", ErrUnknownBuyer, buyerID)
	}
	tag, err := pool.Exec(ctx, sqlSetWebhookURL, buyerID, webhookURL)
	if err != nil {
		return fmt.Errorf("set webhook url: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("set webhook url: %w %s", ErrUnknownBuyer, buyerID)
	}
	return nil
}

// Device is an operator's view of a paired device.
type Device struct {
	ID           string     `json:"id"`
	Name         string     `json:"name"`
	Status       string     `json:"status"`
	Services     []string   `json:"services"`
	SlotsTotal   int        `json:"slots_total"`
	LiveAttempts int        `json:"live_attempts"`
	LastSeenAt   *time.Time `json:"last_seen_at,omitempty"`
	CreatedAt    time.Time  `json:"created_at"`
}

// ListDevices returns every device, oldest first.
func ListDevices(ctx context.Context, pool *pgxpool.Pool) ([]Device, error) {
	rows, err := pool.Query(ctx, sqlListDevices)
	if err != nil {
		return nil, fmt.Errorf("list devices: %w", err)
	}
	devices, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Device, error) {
		var d Device
		err := row.Scan(&d.ID, &d.Name, &d.Status, &d.Services, &d.SlotsTotal, &d.LastSeenAt, &d.CreatedAt, &d.LiveAttempts)
		return d, err
	})
	if err != nil {
		return nil, fmt.Errorf("list devices: %w", err)
	}
	return devices, nil
}
