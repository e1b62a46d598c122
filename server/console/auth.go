package console

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/api"
	"github.com/rendermac/rendermac/server/ratelimit"
)

// Operator credentials: "rmo_" and 32 random bytes, base64url; only
// api.HashSecret of the plaintext is stored (operators.token_hash).
const (
	operatorPrefix = "rmo_"
	operatorBytes  = 32
	// maxCredentialLen bounds a presented credential before it is hashed.
	maxCredentialLen = 256
)

// Session cookies: the operator's id and an expiry, HMAC-tagged with a key
// derived from the signing key. The credential itself never travels again
// after the login form.
const (
	// CookieName is the console's session cookie.
	CookieName = "rendermac_console"
	// SessionTTL is how long a login lasts.
	SessionTTL     = 12 * time.Hour
	sessionPurpose = "console-session"
	sessionTagSize = 16
	idLen          = 36
)

const (
	sqlInsertOperator  = `INSERT INTO operators (id, name, token_hash) VALUES ($1, $2, $3)`
	sqlOperatorByHash  = `SELECT id::text, token_hash FROM operators WHERE token_hash = $1 AND revoked_at IS NULL`
	sqlOperatorLive    = `SELECT true FROM operators WHERE id = $1 AND revoked_at IS NULL`
	sqlRevokeOperator  = `UPDATE operators SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL`
	sqlListOperators   = `SELECT id::text, name, created_at, revoked_at FROM operators ORDER BY created_at, id`
	sqlBuyerKeyExists  = `SELECT true FROM api_keys WHERE key_hash = $1`
	sqlDeviceKeyExists = `SELECT true FROM devices WHERE token_hash = $1`
)

// ErrUnknownOperator is returned for an operator id that names no live
// operator.
var ErrUnknownOperator = errors.New("console: unknown or revoked operator")

// CreateOperator mints an operator credential named name and returns the
// operator's id and the credential's plaintext, which is not stored and
// cannot be shown again.
func CreateOperator(ctx context.Context, pool *pgxpool.Pool, name string) (id, credential string, err error) {
	name = strings.TrimSpace(name)
	if name == "" || len(name) > 200 {
		return "", "", errors.New("create operator: a name of 1 to 200 bytes is required")
	}
	b := make([]byte, operatorBytes)
	if _, err := rand.Read(b); err != nil {
		return "", "", fmt.Errorf("create operator: draw secret: %w", err)
	}
	credential = operatorPrefix + base64.RawURLEncoding.EncodeToString(b)
	id = protocol.UUIDFrom(rand.Reader)
	if _, err := pool.Exec(ctx, sqlInsertOperator, id, name, api.HashSecret(credential)); err != nil {
		return "", "", fmt.Errorf("create operator: %w", err)
	}
	return id, credential, nil
}

// RevokeOperator revokes an operator's credential; its sessions end at
// their next request.
func RevokeOperator(ctx context.Context, pool *pgxpool.Pool, id string) error {
	if !protocol.ValidID(id) {
		return fmt.Errorf("revoke operator %q: %w", id, ErrUnknownOperator)
	}
	tag, err := pool.Exec(ctx, sqlRevokeOperator, id)
	if err != nil {
		return fmt.Errorf("revoke operator %s: %w", id, err)
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("revoke operator %s: %w", id, ErrUnknownOperator)
	}
	return nil
}

// Operator is one operator credential as `admin list-operators` shows it.
type Operator struct {
	ID        string
	Name      string
	CreatedAt time.Time
	RevokedAt *time.Time
}

// ListOperators returns every operator, oldest first.
func ListOperators(ctx context.Context, pool *pgxpool.Pool) ([]Operator, error) {
	rows, err := pool.Query(ctx, sqlListOperators)
	if err != nil {
		return nil, fmt.Errorf("list operators: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Operator, error) {
		var o Operator
		return o, r.Scan(&o.ID, &o.Name, &o.CreatedAt, &o.RevokedAt)
	})
}

// credentialKind is what a presented secret turned out to be.
type credentialKind int

const (
	credUnknown credentialKind = iota
	credOperator
	// credOther is a buyer's API key or a device token: a real secret of
	// the wrong kind, refused with 403.
	credOther
)

// identify looks a presented secret up by its hash. The operator row is
// found through the unique index on token_hash and its hash compared
// again in constant time; a miss is checked against buyers' keys and
// devices' tokens only to answer 403 rather than 401.
func (c *Console) identify(ctx context.Context, secret string) (credentialKind, string, error) {
	if secret == "" || len(secret) > maxCredentialLen {
		return credUnknown, "", nil
	}
	hash := api.HashSecret(secret)
	var id, stored string
	err := c.pool.QueryRow(ctx, sqlOperatorByHash, hash).Scan(&id, &stored)
	switch {
	case err == nil && subtle.ConstantTimeCompare([]byte(stored), []byte(hash)) == 1:
		return credOperator, id, nil
	case err != nil && !errors.Is(err, pgx.ErrNoRows):
		return credUnknown, "", fmt.Errorf("authenticate operator: %w", err)
	}
	for _, q := range []string{sqlBuyerKeyExists, sqlDeviceKeyExists} {
		var ok bool
		err := c.pool.QueryRow(ctx, q, hash).Scan(&ok)
		if err == nil {
			return credOther, "", nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return credUnknown, "", fmt.Errorf("authenticate operator: %w", err)
		}
	}
	return credUnknown, "", nil
}

// sessionTag is the MAC of a session cookie's body.
func (c *Console) sessionTag(body []byte) []byte {
	m := hmac.New(sha256.New, c.sessionKey)
	m.Write(body)
	return m.Sum(nil)[:sessionTagSize]
}

// newSession is the cookie value of a session of operator id until expiry.
func (c *Console) newSession(id string, expiry time.Time) string {
	body := make([]byte, 8, 8+idLen)
	binary.BigEndian.PutUint64(body, uint64(expiry.Unix()))
	body = append(body, id...)
	return base64.RawURLEncoding.EncodeToString(append(body, c.sessionTag(body)...))
}

// openSession checks a cookie value's tag (in constant time) and expiry at
// now and returns the operator's id.
func (c *Console) openSession(v string, now time.Time) (string, bool) {
	raw, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil || len(raw) != 8+idLen+sessionTagSize {
		return "", false
	}
	body, tag := raw[:8+idLen], raw[8+idLen:]
	if !hmac.Equal(tag, c.sessionTag(body)) {
		return "", false
	}
	if now.Unix() >= int64(binary.BigEndian.Uint64(body[:8])) {
		return "", false
	}
	return string(body[8:]), true
}

// bearer returns the secret of an "Authorization: Bearer" header, or "".
func bearer(r *http.Request) string {
	scheme, secret, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(secret)
}

// guard is every console route's gate, in order: a non-loopback peer is
// 403 unless Config.Remote; a valid session cookie of a live operator or
// an operator credential as a bearer secret passes; a buyer's API key or a
// device token is 403; anything else is 401 (the login page for a browser).
// Failed credentials count against the client IP like API keys do.
func (c *Console) guard(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !c.cfg.Remote && !api.FromLoopback(r) {
			c.refuse(w, r, http.StatusForbidden,
				"the console answers loopback clients only; start the server with --console-remote to serve it to other addresses")
			return
		}
		if ck, err := r.Cookie(CookieName); err == nil {
			if id, ok := c.openSession(ck.Value, c.clock.Now()); ok {
				var live bool
				err := c.pool.QueryRow(r.Context(), sqlOperatorLive, id).Scan(&live)
				if err == nil {
					h.ServeHTTP(w, withSession(r, session{operatorID: id, binding: "cookie:" + ck.Value}))
					return
				}
				if !errors.Is(err, pgx.ErrNoRows) {
					c.internal(w, r, err)
					return
				}
			}
		}
		secret := bearer(r)
		if secret == "" {
			c.refuse(w, r, http.StatusUnauthorized, "log in with an operator credential (rendermac admin create-operator)")
			return
		}
		c.authenticate(w, r, secret, func(id string) {
			h.ServeHTTP(w, withSession(r, session{operatorID: id, binding: "bearer:" + api.HashSecret(secret)}))
		})
	})
}

// authenticate judges a presented secret and calls ok for an operator's.
func (c *Console) authenticate(w http.ResponseWriter, r *http.Request, secret string, ok func(operatorID string)) {
	ip := ratelimit.IPKey(r.RemoteAddr)
	if allowed, wait := c.failures.Check(ip); !allowed {
		ratelimit.Refuse(w, "failed console authentications from this address", wait)
		return
	}
	kind, id, err := c.identify(r.Context(), secret)
	switch {
	case err != nil:
		c.internal(w, r, err)
	case kind == credOperator:
		ok(id)
	case kind == credOther:
		c.failures.Allow(ip)
		c.refuse(w, r, http.StatusForbidden, "a buyer's API key or a device token cannot open the console; use an operator credential")
	default:
		c.failures.Allow(ip)
		c.refuse(w, r, http.StatusUnauthorized, "unknown or revoked operator credential")
	}
}

// login is POST /console/login: the form's credential, once checked, is
// exchanged for a session cookie (HttpOnly, SameSite=Strict, Secure over
// TLS, Path /console) and the browser is sent to the fleet page.
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	if !c.cfg.Remote && !api.FromLoopback(r) {
		c.refuse(w, r, http.StatusForbidden, "the console answers loopback clients only")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 4096)
	secret := strings.TrimSpace(r.PostFormValue("credential"))
	if secret == "" {
		c.refuse(w, r, http.StatusUnauthorized, "enter an operator credential")
		return
	}
	ip := ratelimit.IPKey(r.RemoteAddr)
	if allowed, wait := c.failures.Check(ip); !allowed {
		ratelimit.Refuse(w, "failed console authentications from this address", wait)
		return
	}
	kind, id, err := c.identify(r.Context(), secret)
	switch {
	case err != nil:
		c.internal(w, r, err)
		return
	case kind == credOther:
		c.failures.Allow(ip)
		c.refuse(w, r, http.StatusForbidden, "a buyer's API key or a device token cannot open the console; use an operator credential")
		return
	case kind != credOperator:
		c.failures.Allow(ip)
		c.refuse(w, r, http.StatusUnauthorized, "unknown or revoked operator credential")
		return
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: c.newSession(id, c.clock.Now().Add(SessionTTL)), Path: Prefix,
		MaxAge: int(SessionTTL / time.Second), HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, Prefix+"/", http.StatusSeeOther)
}

// logout is POST /console/logout: the cookie is cleared.
func (c *Console) logout(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: Prefix, MaxAge: -1, HttpOnly: true,
		Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, Prefix+"/login", http.StatusSeeOther)
}
