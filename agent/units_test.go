package agent

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/protocol"
)

func TestHeartbeatInterval(t *testing.T) {
	t.Parallel()
	require.Equal(t, time.Second, heartbeatInterval(protocol.Welcome{LeaseTTLMs: 3000, HeartbeatMs: 60_000}))
	require.Equal(t, 5*time.Second, heartbeatInterval(protocol.Welcome{LeaseTTLMs: 60_000, HeartbeatMs: 5000}))
	require.Equal(t, minHeartbeat, heartbeatInterval(protocol.Welcome{LeaseTTLMs: 1, HeartbeatMs: 1}))
}

func TestBackoffFullJitterWithinBounds(t *testing.T) {
	t.Parallel()
	b := backoff{base: 250 * time.Millisecond, max: 30 * time.Second, rnd: rand.New(rand.NewPCG(7, 7))}
	for n := 0; n < 80; n++ {
		ceil := 30 * time.Second
		if n < 7 {
			ceil = 250 * time.Millisecond << n
		}
		d := b.next()
		require.GreaterOrEqual(t, d, time.Duration(0))
		require.LessOrEqual(t, d, ceil, "attempt %d", n)
	}
	// At the cap the draws spread over the whole window, not around its top.
	lo, hi := time.Hour, time.Duration(0)
	for i := 0; i < 1000; i++ {
		d := b.next()
		lo, hi = min(lo, d), max(hi, d)
	}
	require.Less(t, lo, 3*time.Second)
	require.Greater(t, hi, 27*time.Second)
	b.reset()
	require.LessOrEqual(t, b.next(), 250*time.Millisecond, "a reset starts from the base again")
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	good := Config{ServerURL: "https://rm.example/base", DeviceToken: "t", Services: []string{"synthetic.mp4"},
		Slots: 1, WorkDir: t.TempDir(), Rand: rand.New(rand.NewPCG(1, 1))}
	a, err := New(good)
	require.NoError(t, err)
	require.Equal(t, "wss://rm.example/base/v1/provider/ws", a.wsURL)
	for name, mut := range map[string]func(*Config){
		"scheme":   func(c *Config) { c.ServerURL = "ftp://rm.example" },
		"query":    func(c *Config) { c.ServerURL = "https://rm.example/?x=1" },
		"token":    func(c *Config) { c.DeviceToken = "" },
		"slots 0":  func(c *Config) { c.Slots = 0 },
		"slots 65": func(c *Config) { c.Slots = 65 },
		"service":  func(c *Config) { c.Services = []string{"nope"} },
		"dup":      func(c *Config) { c.Services = []string{"synthetic.mp4", "synthetic.mp4"} },
		"rand":     func(c *Config) { c.Rand = nil },
		"work":     func(c *Config) { c.WorkDir = "" },
	} {
		c := good
		mut(&c)
		_, err := New(c)
		require.Error(t, err, name)
	}
}

// A refusal's Retry-After outlasts a shorter backoff, capped; other errors
// and shorter Retry-Afters leave the backoff alone.
func TestReconnectDelayHonoursRetryAfter(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	rec.Header().Set("Retry-After", "7")
	rec.WriteHeader(http.StatusTooManyRequests)
	_, _ = rec.WriteString(`{"code":"rate_limited","message":"too many connections of this device; retry after 7s"}`)
	ae := readAPIError(rec.Result())
	require.Equal(t, 7*time.Second, ae.RetryAfter)
	require.Equal(t, "rate_limited", ae.Code)
	err := fmt.Errorf("dial gateway: %w", ae)
	require.Equal(t, 7*time.Second, reconnectDelay(250*time.Millisecond, err))
	require.Equal(t, 9*time.Second, reconnectDelay(9*time.Second, err))
	require.Equal(t, time.Second, reconnectDelay(time.Second, errors.New("connection reset")))
	require.Equal(t, maxRetryAfter, reconnectDelay(time.Second, &APIError{Status: 429, RetryAfter: time.Hour}))
	rec = httptest.NewRecorder()
	rec.Header().Set("Retry-After", "Wed, 21 Oct 2015 07:28:00 GMT")
	rec.WriteHeader(http.StatusServiceUnavailable)
	require.Zero(t, readAPIError(rec.Result()).RetryAfter, "an HTTP-date is not read")
}
