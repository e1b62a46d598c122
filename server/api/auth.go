package api

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/rendermac/rendermac/protocol/buyer"
	"github.com/rendermac/rendermac/server/ratelimit"
)

// maxBearerLen bounds a presented bearer secret; real ones are far shorter,
// and a bound keeps hostile headers from costing a hash of megabytes.
const maxBearerLen = 256

const sqlBuyerByKey = `SELECT buyer_id::text FROM api_keys WHERE key_hash = $1 AND revoked_at IS NULL`

// HashSecret is the stored form of every bearer secret (API key, device
// token, pairing code): the lowercase hex SHA-256 of the plaintext string.
func HashSecret(plaintext string) string {
	sum := sha256.Sum256([]byte(plaintext))
	return hex.EncodeToString(sum[:])
}

// newSecret draws n bytes from crypto/rand and returns them base64url
// without padding, with prefix (which says what the secret is for when one
// turns up in a paste), and the stored hash.
func newSecret(prefix string, n int) (plaintext, hash string, err error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", "", fmt.Errorf("draw secret: %w", err)
	}
	plaintext = prefix + base64.RawURLEncoding.EncodeToString(b)
	return plaintext, HashSecret(plaintext), nil
}

// bearer returns the secret of an "Authorization: Bearer <secret>" header
// (the scheme is case-insensitive, RFC 9110), or "" when there is none.
func bearer(r *http.Request) string {
	scheme, secret, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	secret = strings.TrimSpace(secret)
	if len(secret) > maxBearerLen {
		return ""
	}
	return secret
}

// buyer authenticates a buyer by API key and calls h with the buyer's id.
// An unknown, revoked or missing key is 401, all alike. Unknown and revoked
// keys count against the client IP's AuthFailuresPerIP; once it is spent,
// every keyed request from that IP is 429 until it refills, before the key
// is looked up, so guessing is bounded and costs no query.
func (a *API) buyer(h func(http.ResponseWriter, *http.Request, string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		key := bearer(r)
		if key == "" {
			unauthorized(w, "missing bearer API key")
			return
		}
		ip := ratelimit.IPKey(r.RemoteAddr)
		if ok, wait := a.limits.authFailures.Check(ip); !ok {
			a.refuse(w, limitAuthFailures, "failed API-key authentications from this address", wait)
			return
		}
		var buyerID string
		err := a.pool.QueryRow(r.Context(), sqlBuyerByKey, HashSecret(key)).Scan(&buyerID)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			a.limits.authFailures.Allow(ip)
			unauthorized(w, "unknown or revoked API key")
		case err != nil:
			a.internal(w, r, fmt.Errorf("authenticate buyer: %w", err))
		default:
			h(w, r, buyerID)
		}
	}
}

func unauthorized(w http.ResponseWriter, message string) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="rendermac"`)
	writeError(w, http.StatusUnauthorized, buyer.CodeUnauthorized, message)
}
