package agent

import (
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/rendermac/rendermac/agent/runner"
	"github.com/rendermac/rendermac/internal/clock"
	"github.com/rendermac/rendermac/protocol"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestHappyPathCommitsUploadedOutput(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.gw.nextConn(t)
	h := c.handshake(t, 2)
	require.Equal(t, protocol.Hello{Type: protocol.TypeHello, AgentVersion: Version,
		Services: []string{"synthetic.mp4", "test.gated", "test.garbage"}, SlotsTotal: 2, SlotsFree: 2}, *h)

	params := map[string]string{"seed": "happy", "duration_ms": "1500"}
	o := b.gw.offer(runner.ServiceSynthetic, params, []byte("input bytes the agent must fetch and hash"))
	c.send(t, o)
	c.expectSlots(t, 1)
	c.expectProgress(t, o, protocol.AttemptDownloading)
	c.expectProgress(t, o, protocol.AttemptRunning)
	c.send(t, &protocol.ProgressOK{Type: protocol.TypeProgressOK, JobID: o.JobID, AttemptID: o.AttemptID, LeaseExpiresAt: o.LeaseExpiresAt})
	c.expectProgress(t, o, protocol.AttemptUploading)

	up := b.gw.nextUpload(t)
	sp, err := runner.ParseSyntheticParams(params)
	require.NoError(t, err)
	want := sp.File()
	require.Equal(t, o.Output.Key, up.key)
	require.Equal(t, want, up.body)
	require.Equal(t, "video/mp4", up.contentType)
	require.Equal(t, "*", up.ifNoneMatch, "an output PUT is create-only (an S3 grant signs If-None-Match: *)")
	require.Empty(t, up.authorization, "artifact grants must not receive the device token")

	cm := next[protocol.Commit](t, c)
	require.Equal(t, protocol.Commit{Type: protocol.TypeCommit, JobID: o.JobID, AttemptID: o.AttemptID,
		LeaseEpoch: o.LeaseEpoch, CommitToken: o.CommitToken,
		Output: protocol.Output{Key: o.Output.Key, Bytes: int64(len(want)), SHA256: sha256Hex(want)}}, *cm)
	c.send(t, &protocol.CommitOK{Type: protocol.TypeCommitOK, JobID: o.JobID, AttemptID: o.AttemptID})
	c.expectSlots(t, 2)

	entries, err := os.ReadDir(b.workDir)
	require.NoError(t, err)
	require.Empty(t, entries, "attempt files are removed")
}

func TestCancelMidRunFailsBuyerCancelled(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.gw.nextConn(t)
	c.handshake(t, 2)
	// The synthetic runner's delay is the thing being interrupted here.
	o := b.gw.offer(runner.ServiceSynthetic, map[string]string{"delay_ms": "600000"}, nil)
	c.send(t, o)
	c.expectSlots(t, 1)
	c.expectProgress(t, o, protocol.AttemptDownloading)
	c.expectProgress(t, o, protocol.AttemptRunning)
	c.send(t, &protocol.Cancel{Type: protocol.TypeCancel, JobID: o.JobID, AttemptID: o.AttemptID})
	c.expectFail(t, o, protocol.FailBuyerCancelled)
	c.expectSlots(t, 2)
	require.Empty(t, b.gw.uploads, "a cancelled attempt uploads nothing")
}

func TestLeaseConflictStopsAttemptWithoutCommit(t *testing.T) {
	t.Parallel()
	for _, reason := range []protocol.ConflictReason{protocol.ReasonAttemptTerminal, protocol.ReasonLeaseExpired,
		protocol.ReasonIdentityMismatch, protocol.ReasonAttemptLost} {
		t.Run(string(reason), func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			c := b.gw.nextConn(t)
			c.handshake(t, 2)
			o := b.gw.offer("test.gated", nil, nil)
			c.send(t, o)
			c.expectSlots(t, 1)
			c.expectProgress(t, o, protocol.AttemptDownloading)
			c.expectProgress(t, o, protocol.AttemptRunning)
			awaitSignal(t, b.gated.started, "runner start")

			c.send(t, &protocol.LeaseConflict{Type: protocol.TypeLeaseConflict, JobID: o.JobID, AttemptID: o.AttemptID, Reason: reason})
			awaitSignal(t, b.gated.stopped, "runner stop")
			c.expectSlots(t, 2)
			// Once the pipeline goroutine is gone nothing more can be sent for the
			// attempt; a probe's fail must then be the very next frame.
			b.agent.jobs.Wait()
			probe := b.gw.offer("no.such.service", nil, nil)
			c.send(t, probe)
			c.expectFail(t, probe, protocol.FailRunnerFailed)
			require.Empty(t, b.gw.uploads, "a lost lease uploads nothing")
		})
	}
}

func TestJobCancellingConflictFailsBuyerCancelled(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.gw.nextConn(t)
	c.handshake(t, 2)
	o := b.gw.offer("test.gated", nil, nil)
	c.send(t, o)
	c.expectSlots(t, 1)
	c.expectProgress(t, o, protocol.AttemptDownloading)
	c.expectProgress(t, o, protocol.AttemptRunning)
	c.send(t, &protocol.LeaseConflict{Type: protocol.TypeLeaseConflict, JobID: o.JobID, AttemptID: o.AttemptID,
		Reason: protocol.ReasonJobCancelling})
	c.expectFail(t, o, protocol.FailBuyerCancelled)
	c.expectSlots(t, 2)
}

func TestReconnectCarriesCommitToNewConnection(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c1 := b.gw.nextConn(t)
	c1.handshake(t, 2)
	o := b.gw.offer("test.gated", nil, nil)
	c1.send(t, o)
	c1.expectSlots(t, 1)
	c1.expectProgress(t, o, protocol.AttemptDownloading)
	c1.expectProgress(t, o, protocol.AttemptRunning)
	awaitSignal(t, b.gated.started, "runner start")

	// Drop the session and keep the agent out while the attempt finishes, so
	// its uploading phase and commit are produced with no connection to carry them.
	b.gw.refuse.Store(503)
	require.NoError(t, c1.ws.CloseNow())
	<-c1.closed
	close(b.gated.release)
	up := b.gw.nextUpload(t)
	require.Eventually(t, func() bool { return b.agent.finalPending(o.AttemptID) }, frameTimeout, time.Millisecond)
	b.gw.refuse.Store(0)

	c2 := b.gw.nextConn(t)
	c2.handshake(t, 1) // the held attempt still occupies its slot
	c2.expectProgress(t, o, protocol.AttemptUploading)
	cm := next[protocol.Commit](t, c2)
	require.Equal(t, o.CommitToken, cm.CommitToken)
	require.Equal(t, o.JobID, cm.JobID)
	require.Equal(t, o.AttemptID, cm.AttemptID)
	require.Equal(t, o.LeaseEpoch, cm.LeaseEpoch)
	require.Equal(t, sha256Hex(up.body), cm.Output.SHA256)
	c2.send(t, &protocol.CommitOK{Type: protocol.TypeCommitOK, JobID: o.JobID, AttemptID: o.AttemptID})
	c2.expectSlots(t, 2)
}

func TestShutdownFailsProviderOfflineAndClosesNormally(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.gw.nextConn(t)
	c.handshake(t, 2)
	o := b.gw.offer("test.gated", nil, nil)
	c.send(t, o)
	c.expectSlots(t, 1)
	c.expectProgress(t, o, protocol.AttemptDownloading)
	c.expectProgress(t, o, protocol.AttemptRunning)
	awaitSignal(t, b.gated.started, "runner start")

	stopped := make(chan error, 1)
	go func() { stopped <- b.stop(t) }()
	c.expectSlots(t, 0) // no new offers while draining
	c.expectFail(t, o, protocol.FailProviderOffline)
	awaitSignal(t, c.closed, "session close")
	require.Equal(t, websocket.StatusNormalClosure, websocket.CloseStatus(c.closeErr))
	require.NoError(t, <-stopped)
}

func TestAttemptFailuresMapToCodes(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		service string
		params  map[string]string
		input   []byte
		mutate  func(*testBundle, *protocol.LeaseOffer)
		phases  []protocol.AttemptStatus
		code    protocol.FailureCode
		message string
	}{
		"download sha mismatch": {service: runner.ServiceSynthetic, input: []byte("abc"),
			mutate: func(_ *testBundle, o *protocol.LeaseOffer) { o.Input.SHA256 = sha256Hex([]byte("abd")) },
			phases: phases("downloading"), code: protocol.FailDownloadFailed, message: "sha256 mismatch"},
		"download size mismatch": {service: runner.ServiceSynthetic, input: []byte("abc"),
			mutate: func(_ *testBundle, o *protocol.LeaseOffer) { o.Input.Bytes = 2 },
			phases: phases("downloading"), code: protocol.FailDownloadFailed, message: "size mismatch"},
		"download not found": {service: runner.ServiceSynthetic, input: []byte("abc"),
			mutate: func(_ *testBundle, o *protocol.LeaseOffer) { o.Input.URL += "-gone" },
			phases: phases("downloading"), code: protocol.FailDownloadFailed, message: "404 not_found"},
		"unknown service": {service: runner.ServiceH264p720,
			code: protocol.FailRunnerFailed, message: "not offered"},
		"bad param": {service: runner.ServiceSynthetic, params: map[string]string{"fps": "30"},
			phases: phases("downloading", "running"), code: protocol.FailRunnerFailed, message: `param "fps"`},
		"invalid output": {service: "test.garbage",
			phases: phases("downloading", "running"), code: protocol.FailRunnerFailed, message: "not a valid MP4"},
		"upload refused": {service: runner.ServiceSynthetic,
			mutate: func(b *testBundle, _ *protocol.LeaseOffer) { b.gw.putStatus.Store(500) },
			phases: phases("downloading", "running", "uploading"), code: protocol.FailUploadFailed, message: "500 store_error"},
		"upload refused by the bucket": {service: runner.ServiceSynthetic,
			mutate: func(b *testBundle, _ *protocol.LeaseOffer) { b.gw.putStatus.Store(http.StatusPreconditionFailed) },
			phases: phases("downloading", "running", "uploading"), code: protocol.FailUploadFailed, message: "412 output_sealed"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			c := b.gw.nextConn(t)
			c.handshake(t, 2)
			o := b.gw.offer(tc.service, tc.params, tc.input)
			if tc.mutate != nil {
				tc.mutate(b, o)
			}
			c.send(t, o)
			c.expectSlots(t, 1)
			for _, p := range tc.phases {
				c.expectProgress(t, o, p)
			}
			f := c.expectFail(t, o, tc.code)
			require.Contains(t, f.Message, tc.message)
			require.NotContains(t, f.Message, "sig=", "grant signatures stay out of fail messages")
			c.expectSlots(t, 2)
		})
	}
}

func phases(names ...string) []protocol.AttemptStatus {
	out := make([]protocol.AttemptStatus, len(names))
	for i, n := range names {
		out[i] = protocol.AttemptStatus(n)
	}
	return out
}

func TestOfferBeyondCapacityFailsNoCapacity(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) { c.Slots = 1 })
	c := b.gw.nextConn(t)
	c.handshake(t, 1)
	o := b.gw.offer("test.gated", nil, nil)
	c.send(t, o)
	c.expectSlots(t, 0)
	c.expectProgress(t, o, protocol.AttemptDownloading)
	c.expectProgress(t, o, protocol.AttemptRunning)

	extra := b.gw.offer(runner.ServiceSynthetic, nil, nil)
	c.send(t, extra)
	c.expectFail(t, extra, protocol.FailNoCapacity)

	close(b.gated.release)
	c.expectProgress(t, o, protocol.AttemptUploading)
	b.gw.nextUpload(t)
	cm := next[protocol.Commit](t, c)
	require.Equal(t, o.CommitToken, cm.CommitToken, "each attempt keeps its own token")
	c.send(t, &protocol.CommitOK{Type: protocol.TypeCommitOK, JobID: o.JobID, AttemptID: o.AttemptID})
	c.expectSlots(t, 1)
}

func TestHeartbeatRenewsLeaseOnTheClock(t *testing.T) {
	t.Parallel()
	stub := clock.NewStub(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	b := setup(t, func(c *Config) { c.Clock = stub })
	c := b.gw.nextConn(t)
	next[protocol.Hello](t, c)
	// heartbeat_ms says a minute, but a third of the 3 s lease is what keeps it alive.
	c.send(t, &protocol.Welcome{Type: protocol.TypeWelcome, DeviceID: "dev-1", LeaseTTLMs: 3000, HeartbeatMs: 60_000})
	o := b.gw.offer("test.gated", nil, nil)
	c.send(t, o)
	c.expectSlots(t, 1)
	c.expectProgress(t, o, protocol.AttemptDownloading)
	c.expectProgress(t, o, protocol.AttemptRunning)
	awaitSignal(t, b.gated.started, "runner start")
	for i := 0; i < 2; i++ {
		// The heartbeat timer is the only one pending: the gated runner uses none.
		require.Eventually(t, func() bool { return stub.Waiters() == 1 }, frameTimeout, time.Millisecond)
		stub.Advance(time.Second)
		c.expectProgress(t, o, protocol.AttemptRunning)
	}
	close(b.gated.release)
	c.expectProgress(t, o, protocol.AttemptUploading)
	b.gw.nextUpload(t)
	next[protocol.Commit](t, c)
	c.send(t, &protocol.CommitOK{Type: protocol.TypeCommitOK, JobID: o.JobID, AttemptID: o.AttemptID})
	c.expectSlots(t, 2)
}

func TestRefusedDeviceTokenEndsRun(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) { c.DeviceToken = "revoked-token" })
	err := b.wait(t)
	require.ErrorContains(t, err, "401 unauthorized")
	require.NotContains(t, err.Error(), "revoked-token")
}

// TestDrainFrameLetsTheRunningAttemptCommitAndStops: an operator's drain
// (SPEC section 5, "Drain") acts as a first SIGTERM: no free slot from then
// on, an offer that still arrives is refused no_capacity, the running
// attempt commits, and Run returns after a normal closure.
func TestDrainFrameLetsTheRunningAttemptCommitAndStops(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.gw.nextConn(t)
	c.handshake(t, 2)
	o := b.gw.offer("test.gated", nil, nil)
	c.send(t, o)
	c.expectSlots(t, 1)
	c.expectProgress(t, o, protocol.AttemptDownloading)
	c.expectProgress(t, o, protocol.AttemptRunning)
	awaitSignal(t, b.gated.started, "runner start")

	c.send(t, &protocol.Drain{Type: protocol.TypeDrain})
	c.expectSlots(t, 0)
	late := b.gw.offer(runner.ServiceSynthetic, nil, nil)
	c.send(t, late)
	c.expectFail(t, late, protocol.FailNoCapacity)
	c.send(t, &protocol.FailOK{Type: protocol.TypeFailOK, JobID: late.JobID, AttemptID: late.AttemptID, Requeued: true})

	close(b.gated.release)
	c.expectProgress(t, o, protocol.AttemptUploading)
	cm := next[protocol.Commit](t, c)
	require.Equal(t, o.AttemptID, cm.AttemptID)
	c.send(t, &protocol.CommitOK{Type: protocol.TypeCommitOK, JobID: o.JobID, AttemptID: o.AttemptID})
	awaitSignal(t, c.closed, "session close")
	require.Equal(t, websocket.StatusNormalClosure, websocket.CloseStatus(c.closeErr))
	require.NoError(t, b.wait(t), "a drained agent's Run returns nil")
}
