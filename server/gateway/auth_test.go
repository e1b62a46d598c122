package gateway

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/harness/deviceclient"
	"github.com/rendermac/rendermac/protocol"
)

func TestHandshakeRefusesBadTokensWith401(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	before := b.snapshot(t)
	for name, header := range map[string]string{
		"missing":      "",
		"unknown":      "Bearer not-a-device-token",
		"wrong scheme": "Basic " + token1,
		"empty bearer": "Bearer ",
		"revoked":      "Bearer " + tokenRevoked,
	} {
		t.Run(name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodGet, b.srv.URL+protocol.SessionPath, nil)
			require.NoError(t, err)
			if header != "" {
				req.Header.Set("Authorization", header)
			}
			// A real upgrade request: the refusal must come before the upgrade.
			req.Header.Set("Connection", "Upgrade")
			req.Header.Set("Upgrade", "websocket")
			req.Header.Set("Sec-WebSocket-Version", "13")
			req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
			require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
			require.Contains(t, resp.Header.Get("WWW-Authenticate"), "Bearer")
			var body struct{ Code, Message string }
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
			require.Equal(t, "unauthorized", body.Code)
			require.NotEmpty(t, body.Message)
		})
	}
	// Through the protocol client too: Dial fails with the 401.
	ctx, cancel := context.WithTimeout(context.Background(), deviceclient.Timeout)
	defer cancel()
	_, resp, err := deviceclient.Dial(ctx, b.wsURL(), "wrong")
	require.Error(t, err)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.Equal(t, before, b.snapshot(t), "a refused handshake changes nothing")
	require.Zero(t, metricValue(b.m.Sessions))
}

func TestHelloIsAnsweredWithWelcomeAndDescribesTheDevice(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	c := b.dial(t, token1)
	w := deviceclient.MustHello(t, c, []string{service, "ffmpeg.h264_720p", service}, 2, 2)
	require.Equal(t, &protocol.Welcome{Type: protocol.TypeWelcome, DeviceID: device1, LeaseTTLMs: ttl.Milliseconds(),
		HeartbeatMs: (ttl / 3).Milliseconds()}, w)
	var got struct {
		services []string
		slots    int
		status   string
	}
	row := b.pool.QueryRow(context.Background(), `SELECT services, slots_total, status FROM devices WHERE id = $1`, device1)
	require.NoError(t, row.Scan(&got.services, &got.slots, &got.status))
	require.Equal(t, []string{service, "ffmpeg.h264_720p"}, got.services)
	require.Equal(t, 2, got.slots)
	require.Equal(t, "online", got.status)
	require.Equal(t, 1.0, metricValue(b.m.Sessions))
	c.Close()
	require.Eventually(t, func() bool { return metricValue(b.m.Sessions) == 0 }, deviceclient.Timeout, tick)
}

func TestFirstFrameMustBeHello(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	c := b.dial(t, token1)
	deviceclient.MustSend(t, c, &protocol.Slots{Type: protocol.TypeSlots, SlotsFree: 1})
	e := deviceclient.Expect[protocol.ErrorMessage](t, c)
	require.Equal(t, protocol.CodeBadMessage, e.Code)
	require.Contains(t, e.Message, "first frame must be hello")
	deviceclient.MustHello(t, c, services, 1, 1)
	deviceclient.MustSend(t, c, &protocol.Hello{Type: protocol.TypeHello, AgentVersion: "x", Services: services,
		SlotsTotal: 1, SlotsFree: 1})
	e = deviceclient.Expect[protocol.ErrorMessage](t, c)
	require.Contains(t, e.Message, "already received")
}

// A device that shrinks its slots while it holds more attempts keeps a
// slots_total that covers them (invariant 9), and is offered nothing more.
func TestHelloNeverDropsSlotsTotalBelowLiveAttempts(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	b.createJob(t, false)
	b.createJob(t, false)
	b.createJob(t, false)
	c := b.connect(t, token1, 2, 2)
	deviceclient.Expect[protocol.LeaseOffer](t, c)
	deviceclient.Expect[protocol.LeaseOffer](t, c)
	c.Drop()
	c2 := b.connect(t, token1, 1, 1)
	var slots int
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT slots_total FROM devices WHERE id = $1`, device1).Scan(&slots))
	require.Equal(t, 2, slots)
	// The session believes one slot is free; Lease's count says no_slot,
	// so nothing is offered: the database's count is the bound.
	deviceclient.MustSend(t, c2, &protocol.Slots{Type: protocol.TypeSlots, SlotsFree: 1})
	deviceclient.ExpectNone(t, c2, 300*time.Millisecond, "offered beyond slots_total")
	requireLiveAttempts(t, b, device1, 2)
	// Once the sweeper ends the dropped session's attempts, the new session
	// is offered the requeued work, although its agent's free count never
	// changed (so it sends no slots report to reopen the session).
	b.clock.Advance(ttl)
	ran, err := b.gw.sweepOnce(context.Background())
	require.NoError(t, err)
	require.True(t, ran)
	// The lost notices for the dropped session's attempts reach the new
	// session (the device's), and their slots are free again. The offer
	// may come before them: it fills the slot this session already counted
	// free, not one a notice frees (SPEC section 5 orders only the latter).
	wait, stop := context.WithTimeout(context.Background(), deviceclient.Timeout)
	defer stop()
	lost, offered := 0, false
	for lost == 0 || !offered {
		msg, err := c2.Next(wait)
		require.NoError(t, err, "lost notices %d, offered %v", lost, offered)
		if lc, ok := msg.(*protocol.LeaseConflict); ok && lc.Reason == protocol.ReasonAttemptLost {
			lost++
			continue
		}
		again, ok := msg.(*protocol.LeaseOffer)
		require.True(t, ok, "unexpected frame %T %+v", msg, msg)
		require.False(t, offered, "a second offer beyond slots_total 1")
		require.Equal(t, 2, again.AttemptNumber)
		offered = true
	}
}

// A device revoked between the handshake and its hello is closed with
// 1008 and not described from the hello.
func TestHelloFromADeviceRevokedMeanwhileCloses1008(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	c := b.dial(t, token1)
	require.NoError(t, b.svc.RevokeDevice(context.Background(), device1))
	deviceclient.MustSend(t, c, &protocol.Hello{Type: protocol.TypeHello, AgentVersion: "x", Services: services,
		SlotsTotal: 3, SlotsFree: 3})
	deviceclient.ExpectClosed(t, c, websocket.StatusPolicyViolation)
	var slots int
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT slots_total FROM devices WHERE id = $1`, device1).Scan(&slots))
	require.Equal(t, 4, slots)
}
