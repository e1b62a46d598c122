package gateway

import (
	"context"
	"strings"
	"testing"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/harness/deviceclient"
	"github.com/rendermac/rendermac/protocol"
)

// Every kind of bad input gets bad_message naming what is wrong, and the
// rows stay exactly as they were; the session goes on.
func TestBadFramesAreAnsweredAndChangeNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{MaxBadMessages: 100})
	b.createJob(t, false)
	c := b.connect(t, token1, 1, 1)
	o := deviceclient.Expect[protocol.LeaseOffer](t, c)
	ids := `"job_id":"` + o.JobID + `","attempt_id":"` + o.AttemptID + `"`
	cases := []struct{ name, frame, want string }{
		{"malformed JSON", `{"type":"progress",`, "malformed JSON"},
		{"not an object", `[1,2]`, "malformed JSON"},
		{"missing type", `{"slots_free":1}`, `"type": missing`},
		{"unknown type", `{"type":"launch_missiles"}`, `unknown type "launch_missiles"`},
		{"gateway-only type", `{"type":"commit_ok",` + ids + `}`, `unknown type "commit_ok"`},
		{"missing epoch", `{"type":"progress",` + ids + `,"phase":"running"}`, `"lease_epoch": missing`},
		{"missing output", `{"type":"commit",` + ids + `,"lease_epoch":1,"commit_token":"` + o.CommitToken + `"}`, `"output": missing`},
		{"wrong type", `{"type":"progress",` + ids + `,"lease_epoch":"1","phase":"running"}`, `"lease_epoch": must be a number`},
		{"unknown field", `{"type":"slots","slots_free":1,"device_id":"` + device2 + `"}`, `"device_id": unknown field`},
		{"not a lease phase", `{"type":"progress",` + ids + `,"lease_epoch":1,"phase":"succeeded"}`, `"phase"`},
		{"bad sha", `{"type":"commit",` + ids + `,"lease_epoch":1,"commit_token":"x","output":{"key":"k","bytes":1,"sha256":"zz"}}`, `"output.sha256"`},
	}
	before := b.snapshot(t)
	for _, tc := range cases {
		deviceclient.MustSendRaw(t, c, []byte(tc.frame))
		e := deviceclient.Expect[protocol.ErrorMessage](t, c)
		require.Equal(t, protocol.CodeBadMessage, e.Code, tc.name)
		require.Contains(t, e.Message, tc.want, tc.name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), deviceclient.Timeout)
	defer cancel()
	require.NoError(t, c.SendBinary(ctx, []byte(`{"type":"slots","slots_free":1}`)))
	e := deviceclient.Expect[protocol.ErrorMessage](t, c)
	require.Contains(t, e.Message, "JSON text")
	require.Equal(t, before, b.snapshot(t), "bad frames changed rows")
	require.Equal(t, float64(len(cases)+1), metricValue(b.m.BadMessages))
	// The session is still good for real frames.
	deviceclient.MustSend(t, c, deviceclient.Progress(o, protocol.AttemptRunning))
	deviceclient.Expect[protocol.ProgressOK](t, c)
}

func TestRepeatedBadFramesCloseWith1008(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{MaxBadMessages: 3})
	c := b.connect(t, token1, 1, 1)
	before := b.snapshot(t)
	for range 3 {
		deviceclient.MustSendRaw(t, c, []byte(`{"type":`))
	}
	for range 3 {
		require.Equal(t, protocol.CodeBadMessage, deviceclient.Expect[protocol.ErrorMessage](t, c).Code)
	}
	deviceclient.ExpectClosed(t, c, websocket.StatusPolicyViolation)
	require.Equal(t, before, b.snapshot(t))
	require.Equal(t, 3.0, metricValue(b.m.BadMessages))
}

func TestOversizedFrameClosesWith1009(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	c := b.connect(t, token1, 1, 1)
	before := b.snapshot(t)
	big := `{"type":"slots","slots_free":1,"pad":"` + strings.Repeat("x", protocol.ReadLimitBytes) + `"}`
	deviceclient.MustSendRaw(t, c, []byte(big))
	deviceclient.ExpectClosed(t, c, websocket.StatusMessageTooBig)
	require.Equal(t, before, b.snapshot(t))
}

// A frame of exactly the limit is read (and here judged on its content).
func TestFrameAtTheLimitIsRead(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	c := b.connect(t, token1, 1, 1)
	prefix, suffix := `{"type":"slots","slots_free":1,"pad":"`, `"}`
	frame := prefix + strings.Repeat("x", protocol.ReadLimitBytes-len(prefix)-len(suffix)) + suffix
	require.Len(t, frame, protocol.ReadLimitBytes)
	deviceclient.MustSendRaw(t, c, []byte(frame))
	require.Contains(t, deviceclient.Expect[protocol.ErrorMessage](t, c).Message, `"pad": unknown field`)
}
