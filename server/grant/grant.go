// Package grant signs and checks artifact grants: URLs that allow one
// operation (get or put) on one artifact key until an expiry, with an
// HMAC-SHA256 over exactly those three things. A grant for one key opens no
// other, and a tampered or expired one opens nothing.
package grant

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Op is what a grant allows.
type Op string

// Operations.
const (
	Get Op = "get"
	Put Op = "put"
)

// PathPrefix is where the artifact handler serves grants.
const PathPrefix = "/v1/artifacts/"

// Errors returned by Check; all of them mean "no access".
var (
	ErrExpired   = errors.New("grant expired")
	ErrBadSig    = errors.New("grant signature invalid")
	ErrMalformed = errors.New("grant malformed")
)

// MinKeyBytes is the shortest signing key accepted.
const MinKeyBytes = 32

// Signer signs grants with one secret key for one public base URL.
type Signer struct {
	key  []byte
	base string
}

// NewSigner returns a signer; key must be at least MinKeyBytes long, and
// publicURL is the server's externally reachable base URL (no trailing slash).
func NewSigner(key []byte, publicURL string) (*Signer, error) {
	if len(key) < MinKeyBytes {
		return nil, fmt.Errorf("grant signing key is %d bytes, want at least %d", len(key), MinKeyBytes)
	}
	u, err := url.Parse(publicURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("public URL %q must be an absolute http(s) URL", publicURL)
	}
	return &Signer{key: append([]byte(nil), key...), base: strings.TrimRight(publicURL, "/")}, nil
}

func (s *Signer) sign(op Op, key string, exp int64) string {
	m := hmac.New(sha256.New, s.key)
	fmt.Fprintf(m, "%s\n%s\n%d", op, key, exp)
	return hex.EncodeToString(m.Sum(nil))
}

// URL returns a grant URL for op on key that expires at now+ttl. The key
// must already be validated by the caller (artifact.ValidateKey).
func (s *Signer) URL(op Op, key string, now time.Time, ttl time.Duration) string {
	exp := now.Add(ttl).Unix()
	q := url.Values{"op": {string(op)}, "exp": {strconv.FormatInt(exp, 10)}, "sig": {s.sign(op, key, exp)}}
	return s.base + PathPrefix + key + "?" + q.Encode()
}

// Check verifies a grant presented for op on key: the signature must match
// (compared in constant time) and now must be before the expiry.
func (s *Signer) Check(op Op, key string, q url.Values, now time.Time) error {
	if Op(q.Get("op")) != op {
		return fmt.Errorf("%w: grant is for op %q, not %q", ErrMalformed, q.Get("op"), op)
	}
	exp, err := strconv.ParseInt(q.Get("exp"), 10, 64)
	if err != nil {
		return fmt.Errorf("%w: exp", ErrMalformed)
	}
	want := s.sign(op, key, exp)
	if !hmac.Equal([]byte(want), []byte(q.Get("sig"))) {
		return ErrBadSig
	}
	if !now.Before(time.Unix(exp, 0)) {
		return ErrExpired
	}
	return nil
}

// Issuer hands out grant URLs. The control plane's own Signer issues URLs
// its artifact handler serves; an object store issues presigned URLs of the
// bucket (artifact.S3), so the holder moves the bytes without the control
// plane. Either way a URL allows op on key alone, until now+ttl.
type Issuer interface {
	Grant(ctx context.Context, op Op, key string, now time.Time, ttl time.Duration) (string, error)
}

var _ Issuer = (*Signer)(nil)

// Grant is URL as an Issuer; it never fails.
func (s *Signer) Grant(_ context.Context, op Op, key string, now time.Time, ttl time.Duration) (string, error) {
	return s.URL(op, key, now, ttl), nil
}

// DeriveKey returns a 32-byte key for another use of the signing secret
// (purpose names it, e.g. "api-cursor"): HMAC-SHA256 of the purpose under
// the signing key. Keys of different purposes are independent, and none
// can sign or check a grant, so one secret serves several MACs without
// one's tags being valid for another.
func (s *Signer) DeriveKey(purpose string) []byte {
	m := hmac.New(sha256.New, s.key)
	fmt.Fprintf(m, "rendermac derived key\n%s", purpose)
	return m.Sum(nil)
}
