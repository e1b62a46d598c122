package api_test

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/internal/clock"
	"github.com/rendermac/rendermac/server/api"
	"github.com/rendermac/rendermac/server/ratelimit"
)

// withLimits sets the API's limits, judged on a stub clock the test moves.
func withLimits(l ratelimit.Limits, c *clock.Stub) func(*api.Config) {
	return func(cfg *api.Config) {
		l.Clock = c
		cfg.Limits = l
	}
}

// doFrom is do from the loopback address ip (127.0.0.0/8 is all local on
// Linux), so that per-IP limits see another client.
func (b *bundle) doFrom(t *testing.T, ip, method, path, key string, body []byte) response {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	tr := &http.Transport{DialContext: d.DialContext}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequest(method, b.srv.URL+path, bytes.NewReader(body))
	require.NoError(t, err)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return response{Status: resp.StatusCode, Header: resp.Header, Body: data}
}

// requireLimited checks a 429 rate_limited with the Retry-After seconds
// and the message that repeats them.
func requireLimited(t *testing.T, r response, retryAfter string) {
	t.Helper()
	requireError(t, r, http.StatusTooManyRequests, "rate_limited")
	require.Equal(t, retryAfter, r.Header.Get("Retry-After"))
	require.Contains(t, string(r.Body), "retry after "+retryAfter+"s")
	t.Logf("429 Retry-After: %s body: %s", r.Header.Get("Retry-After"), bytes.TrimSpace(r.Body))
}

const badPairBody = `{"code":"AAAA-AAAA-BBBB-BBBB-CCCC-CCCC","name":"m","services":["synthetic.mp4"]}`

func TestPairRateLimitPerIP(t *testing.T) {
	t.Parallel()
	c := clock.NewStub(t0)
	b := setup(t, withLimits(ratelimit.Limits{PairPerIP: ratelimit.Rule{N: 3, Per: 30 * time.Second}}, c))
	for range 3 {
		requireError(t, b.doFrom(t, "127.0.0.1", http.MethodPost, "/v1/provider/pair", "", []byte(badPairBody)),
			http.StatusUnauthorized, "invalid_pairing_code")
	}
	code := b.pairingCode(t, time.Hour)
	good := []byte(`{"code":"` + code + `","name":"m","services":["synthetic.mp4"]}`)
	requireLimited(t, b.doFrom(t, "127.0.0.1", http.MethodPost, "/v1/provider/pair", "", good), "10")
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM devices`), "a refused request pairs nothing, even with a good code")

	// Another address has its own bucket.
	requireError(t, b.doFrom(t, "127.0.0.2", http.MethodPost, "/v1/provider/pair", "", []byte(badPairBody)),
		http.StatusUnauthorized, "invalid_pairing_code")

	c.Advance(9 * time.Second)
	requireLimited(t, b.doFrom(t, "127.0.0.1", http.MethodPost, "/v1/provider/pair", "", good), "1")
	c.Advance(time.Second)
	require.Equal(t, http.StatusCreated, b.doFrom(t, "127.0.0.1", http.MethodPost, "/v1/provider/pair", "", good).Status,
		"after Retry-After the address is let in again")
}

func TestAuthFailureRateLimitPerIP(t *testing.T) {
	t.Parallel()
	c := clock.NewStub(t0)
	b := setup(t, withLimits(ratelimit.Limits{AuthFailuresPerIP: ratelimit.Rule{N: 2, Per: time.Minute}}, c))
	get := func(ip, key string) response { return b.doFrom(t, ip, http.MethodGet, "/v1/jobs", key, nil) }

	// Successes and missing keys do not count.
	for range 5 {
		require.Equal(t, http.StatusOK, get("127.0.0.1", b.key).Status)
		requireError(t, get("127.0.0.1", ""), http.StatusUnauthorized, "unauthorized")
	}
	requireError(t, get("127.0.0.1", "rmk_wrong1"), http.StatusUnauthorized, "unauthorized")
	requireError(t, get("127.0.0.1", "rmk_wrong2"), http.StatusUnauthorized, "unauthorized")
	requireLimited(t, get("127.0.0.1", "rmk_wrong3"), "30")
	// Once spent, a right key from that address is refused too: the check
	// comes before the lookup, so guessing there costs nothing and tells
	// nothing.
	requireLimited(t, get("127.0.0.1", b.key), "30")
	// Another address is unaffected.
	require.Equal(t, http.StatusOK, get("127.0.0.2", b.key).Status)
	requireError(t, get("127.0.0.2", "rmk_wrong4"), http.StatusUnauthorized, "unauthorized")

	c.Advance(30 * time.Second)
	require.Equal(t, http.StatusOK, get("127.0.0.1", b.key).Status, "recovered after Retry-After")
	requireError(t, get("127.0.0.1", "rmk_wrong5"), http.StatusUnauthorized, "unauthorized")
	requireLimited(t, get("127.0.0.1", "rmk_wrong6"), "30")
}

func TestJobCreationRateLimitPerBuyer(t *testing.T) {
	t.Parallel()
	c := clock.NewStub(t0)
	b := setup(t, withLimits(ratelimit.Limits{JobsPerBuyer: ratelimit.Rule{N: 3, Per: 3 * time.Second}}, c))
	const body = `{"service":"synthetic.mp4","params":{"seed":"a"}}`
	for range 3 {
		require.Equal(t, http.StatusCreated, b.createJob(t, b.key, body).Status)
	}
	requireLimited(t, b.createJob(t, b.key, body), "1")
	require.Equal(t, 3, b.count(t, `SELECT count(*) FROM jobs WHERE buyer_id = $1`, buyerID), "a refused create writes nothing")

	// Another buyer, from the same address, has its own bucket.
	require.Equal(t, http.StatusCreated, b.createJob(t, b.otherKey, body).Status)

	c.Advance(time.Second)
	require.Equal(t, http.StatusCreated, b.createJob(t, b.key, body).Status, "one token refilled")
	requireLimited(t, b.createJob(t, b.key, body), "1")
}

// The defaults are what a server without limit flags runs with.
func TestDefaultLimits(t *testing.T) {
	t.Parallel()
	l := ratelimit.Limits{}.WithDefaults()
	require.Equal(t, ratelimit.DefaultPairPerIP, l.PairPerIP)
	require.Equal(t, ratelimit.DefaultJobsPerBuyer, l.JobsPerBuyer)
	off := ratelimit.Unlimited().WithDefaults()
	require.True(t, off.PairPerIP.IsOff() && off.AuthFailuresPerIP.IsOff() && off.JobsPerBuyer.IsOff() &&
		off.ConnectsPerIP.IsOff() && off.ConnectsPerDevice.IsOff())
}
