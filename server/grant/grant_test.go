package grant

import (
	"bytes"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func parse(t *testing.T, raw string) (string, url.Values) {
	t.Helper()
	u, err := url.Parse(raw)
	require.NoError(t, err)
	return strings.TrimPrefix(u.Path, PathPrefix), u.Query()
}

func TestGrantScopesOneKeyOneOpUntilExpiry(t *testing.T) {
	t.Parallel()
	s, err := NewSigner([]byte(strings.Repeat("k", 32)), "https://cp.example/")
	require.NoError(t, err)
	now := time.Unix(1_800_000_000, 0)
	raw := s.URL(Put, "outputs/j/a.mp4", now, time.Minute)
	require.True(t, strings.HasPrefix(raw, "https://cp.example/v1/artifacts/outputs/j/a.mp4?"))
	key, q := parse(t, raw)
	require.NoError(t, s.Check(Put, key, q, now))
	require.ErrorIs(t, s.Check(Put, "outputs/j/b.mp4", q, now), ErrBadSig, "another key")
	require.ErrorIs(t, s.Check(Get, key, q, now), ErrMalformed, "another op")
	require.ErrorIs(t, s.Check(Put, key, q, now.Add(time.Minute)), ErrExpired)
	tampered := url.Values{"op": {"put"}, "exp": {q.Get("exp") + "0"}, "sig": {q.Get("sig")}}
	require.ErrorIs(t, s.Check(Put, key, tampered, now), ErrBadSig, "extended expiry")
	other, err := NewSigner([]byte(strings.Repeat("x", 32)), "https://cp.example")
	require.NoError(t, err)
	require.ErrorIs(t, other.Check(Put, key, q, now), ErrBadSig, "another signing key")
}

func TestNewSignerRejectsWeakKeysAndBadURLs(t *testing.T) {
	t.Parallel()
	_, err := NewSigner([]byte("short"), "https://cp.example")
	require.ErrorContains(t, err, "at least 32")
	_, err = NewSigner([]byte(strings.Repeat("k", 32)), "cp.example")
	require.ErrorContains(t, err, "absolute http(s) URL")
}

// Derived keys are stable per purpose, differ across purposes and secrets,
// and are not the signing key.
func TestDeriveKeyIsPerPurpose(t *testing.T) {
	a, err := NewSigner(bytes.Repeat([]byte{1}, MinKeyBytes), "http://x.test")
	require.NoError(t, err)
	b, err := NewSigner(bytes.Repeat([]byte{2}, MinKeyBytes), "http://x.test")
	require.NoError(t, err)
	require.Len(t, a.DeriveKey("api-cursor"), 32)
	require.Equal(t, a.DeriveKey("api-cursor"), a.DeriveKey("api-cursor"))
	require.NotEqual(t, a.DeriveKey("api-cursor"), a.DeriveKey("other"))
	require.NotEqual(t, a.DeriveKey("api-cursor"), b.DeriveKey("api-cursor"))
	require.NotEqual(t, bytes.Repeat([]byte{1}, MinKeyBytes), a.DeriveKey("api-cursor"))
}
