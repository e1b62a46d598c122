package gateway

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/harness/deviceclient"
	"github.com/rendermac/rendermac/internal/clock"
	"github.com/rendermac/rendermac/server/ratelimit"
)

// limitsConfig turns every limit off but the ones given, judged on c.
func limitsConfig(c *clock.Stub, perIP, perDevice ratelimit.Rule) Config {
	l := ratelimit.Unlimited()
	l.ConnectsPerIP, l.ConnectsPerDevice, l.Clock = perIP, perDevice, c
	return Config{Limits: l}
}

// dialFrom opens a real coder/websocket session from ip; on success it says
// hello, expects welcome and closes the session.
func (b *bundle) dialFrom(t *testing.T, ip, token string) *http.Response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deviceclient.Timeout)
	defer cancel()
	c, resp, err := deviceclient.DialFrom(ctx, b.wsURL(), token, ip)
	if err != nil {
		require.NotNil(t, resp, "dial from %s: %v", ip, err)
		return resp
	}
	defer c.Close()
	deviceclient.MustHello(t, c, services, 1, 1)
	return resp
}

// requireRefused checks a 429 rate_limited handshake with Retry-After.
func requireRefused(t *testing.T, resp *http.Response, retryAfter string) {
	t.Helper()
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	require.Equal(t, retryAfter, resp.Header.Get("Retry-After"))
	require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var body struct{ Code, Message string }
	require.NoError(t, json.Unmarshal(raw, &body), "body: %s", raw)
	require.Equal(t, "rate_limited", body.Code)
	require.Contains(t, body.Message, "retry after "+retryAfter+"s")
	t.Logf("429 Retry-After: %s body: %s", retryAfter, raw)
}

func TestConnectsPerIPLimit(t *testing.T) {
	t.Parallel()
	c := clock.NewStub(t0)
	b := setup(t, limitsConfig(c, ratelimit.Rule{N: 3, Per: 3 * time.Second}, ratelimit.Off))
	require.Equal(t, http.StatusSwitchingProtocols, b.dialFrom(t, "127.0.0.1", token1).StatusCode)
	// An unauthenticated attempt counts too: the bucket is taken before
	// the token is looked up.
	require.Equal(t, http.StatusUnauthorized, b.dialFrom(t, "127.0.0.1", "not-a-token").StatusCode)
	require.Equal(t, http.StatusSwitchingProtocols, b.dialFrom(t, "127.0.0.1", token2).StatusCode)
	requireRefused(t, b.dialFrom(t, "127.0.0.1", token1), "1")
	requireRefused(t, b.dialFrom(t, "127.0.0.1", "not-a-token"), "1")

	// Another address is not affected.
	require.Equal(t, http.StatusSwitchingProtocols, b.dialFrom(t, "127.0.0.2", token1).StatusCode)

	c.Advance(time.Second)
	require.Equal(t, http.StatusSwitchingProtocols, b.dialFrom(t, "127.0.0.1", token1).StatusCode, "recovered after Retry-After")
	requireRefused(t, b.dialFrom(t, "127.0.0.1", token1), "1")
	require.Equal(t, 3.0, metricValue(b.m.RateLimited.WithLabelValues("connects_per_ip")))
}

func TestConnectsPerDeviceLimit(t *testing.T) {
	t.Parallel()
	c := clock.NewStub(t0)
	b := setup(t, limitsConfig(c, ratelimit.Off, ratelimit.Rule{N: 2, Per: time.Minute}))
	for range 2 {
		require.Equal(t, http.StatusSwitchingProtocols, b.dialFrom(t, "127.0.0.1", token1).StatusCode)
	}
	// The third session (and so the third hello) of device1 is refused,
	// from any address.
	requireRefused(t, b.dialFrom(t, "127.0.0.1", token1), "30")
	requireRefused(t, b.dialFrom(t, "127.0.0.3", token1), "30")
	// Another device, from the same address, has its own bucket.
	require.Equal(t, http.StatusSwitchingProtocols, b.dialFrom(t, "127.0.0.1", token2).StatusCode)
	// Failed authentications do not spend a device's bucket (they have no device).
	require.Equal(t, http.StatusUnauthorized, b.dialFrom(t, "127.0.0.1", "not-a-token").StatusCode)

	c.Advance(30 * time.Second)
	require.Equal(t, http.StatusSwitchingProtocols, b.dialFrom(t, "127.0.0.1", token1).StatusCode, "recovered after Retry-After")
	requireRefused(t, b.dialFrom(t, "127.0.0.1", token1), "30")
	require.Equal(t, 3.0, metricValue(b.m.RateLimited.WithLabelValues("connects_per_device")))
}
