package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/internal/dbstat"
	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server"
	"github.com/rendermac/rendermac/server/store"
)

func TestProgressOK(t *testing.T) {
	t.Parallel()
	b := setup(t, server.Config{})
	b.createJob(t, t0, nil)
	offer := b.lease(t, t0, deviceID)
	now := t0.Add(10 * time.Second)
	r := b.progress(t, now, deviceID, offer, protocol.AttemptRunning)
	require.Equal(t, protocol.Reply{Code: protocol.CodeProgressOK, JobID: offer.JobID, AttemptID: offer.AttemptID,
		LeaseExpiresAt: now.Add(ttl)}, r)
	a := b.attempt(t, offer.AttemptID)
	require.Equal(t, protocol.AttemptRunning, a.Status)
	require.Equal(t, now.Add(ttl), a.LeaseExpiresAt)
	require.Equal(t, 1, a.LeaseEpoch, "progress never changes the epoch")

	// The same phase again renews without a journal row.
	later := now.Add(20 * time.Second)
	r = b.progress(t, later, deviceID, offer, protocol.AttemptRunning)
	require.Equal(t, protocol.CodeProgressOK, r.Code)
	require.Equal(t, later.Add(ttl), b.attempt(t, offer.AttemptID).LeaseExpiresAt)
	require.Equal(t, later, b.snapshot(t).Devices[0].LastSeenAt)
	require.Equal(t, []string{"job ->queued  buyer", "attempt ->leased  matcher", "job queued->active  matcher",
		"attempt leased->running  device"}, b.journalOf(t, offer.JobID))
}

func TestProgressIdentityMismatch(t *testing.T) {
	t.Parallel()
	b := setup(t, server.Config{})
	b.createJob(t, t0, nil)
	b.createJob(t, t0.Add(time.Second), nil)
	offer := b.lease(t, t0, deviceID)
	other := b.lease(t, t0, deviceID)
	before := b.snapshot(t)
	cases := map[string]struct {
		device string
		p      protocol.Progress
	}{
		"foreign device": {otherDevice, protocol.Progress{JobID: offer.JobID, AttemptID: offer.AttemptID, LeaseEpoch: 1}},
		"wrong epoch":    {deviceID, protocol.Progress{JobID: offer.JobID, AttemptID: offer.AttemptID, LeaseEpoch: 2}},
		"wrong attempt":  {deviceID, protocol.Progress{JobID: offer.JobID, AttemptID: missingID, LeaseEpoch: 1}},
		"other job":      {deviceID, protocol.Progress{JobID: offer.JobID, AttemptID: other.AttemptID, LeaseEpoch: 1}},
		"missing job":    {deviceID, protocol.Progress{JobID: missingID, AttemptID: offer.AttemptID, LeaseEpoch: 1}},
	}
	for name, c := range cases {
		c.p.Phase = protocol.AttemptRunning
		r, err := b.svc.Progress(context.Background(), t0, c.device, c.p)
		require.NoError(t, err)
		require.Equal(t, protocol.Reply{Code: protocol.CodeLeaseConflict, Reason: protocol.ReasonIdentityMismatch}, r, name)
	}
	require.Equal(t, before, b.snapshot(t), "a conflict mutates nothing")
}

func TestProgressAttemptTerminal(t *testing.T) {
	t.Parallel()
	b := setup(t, server.Config{})
	offer, c := b.uploaded(t, t0)
	r, err := b.svc.CommitBegin(context.Background(), t0, deviceID, c)
	require.NoError(t, err)
	require.Equal(t, protocol.CodeCommitPending, r.Code)
	r = b.progress(t, t0, deviceID, offer, protocol.AttemptUploading)
	require.Equal(t, protocol.Reply{Code: protocol.CodeLeaseConflict, Reason: protocol.ReasonAttemptTerminal}, r)
}

func TestProgressJobCancelling(t *testing.T) {
	t.Parallel()
	b := setup(t, server.Config{})
	b.createJob(t, t0, nil)
	offer := b.lease(t, t0, deviceID)
	r, err := b.svc.Cancel(context.Background(), t0, buyerID, offer.JobID)
	require.NoError(t, err)
	require.Equal(t, protocol.CodeCancelling, r.Code)
	// Even an expired lease reports job_cancelling: that check comes first.
	r = b.progress(t, t0.Add(ttl), deviceID, offer, protocol.AttemptRunning)
	require.Equal(t, protocol.Reply{Code: protocol.CodeLeaseConflict, Reason: protocol.ReasonJobCancelling}, r)
}

func TestProgressLeaseExpired(t *testing.T) {
	t.Parallel()
	b := setup(t, server.Config{})
	b.createJob(t, t0, nil)
	offer := b.lease(t, t0, deviceID)
	require.Equal(t, protocol.CodeProgressOK, b.progress(t, t0.Add(ttl-time.Microsecond), deviceID, offer, protocol.AttemptLeased).Code)
	r := b.progress(t, t0.Add(2*ttl-2*time.Microsecond), deviceID, offer, protocol.AttemptRunning)
	require.Equal(t, protocol.CodeProgressOK, r.Code)
	r = b.progress(t, r.LeaseExpiresAt, deviceID, offer, protocol.AttemptRunning)
	require.Equal(t, protocol.Reply{Code: protocol.CodeLeaseConflict, Reason: protocol.ReasonLeaseExpired}, r,
		"lease_expires_at <= now is expired")
}

func TestProgressPhaseRegression(t *testing.T) {
	t.Parallel()
	b := setup(t, server.Config{})
	b.createJob(t, t0, nil)
	offer := b.lease(t, t0, deviceID)
	require.Equal(t, protocol.CodeProgressOK, b.progress(t, t0, deviceID, offer, protocol.AttemptRunning).Code)
	r := b.progress(t, t0, deviceID, offer, protocol.AttemptDownloading)
	require.Equal(t, protocol.Reply{Code: protocol.CodeLeaseConflict, Reason: protocol.ReasonPhaseRegression}, r)
	require.Equal(t, protocol.AttemptRunning, b.attempt(t, offer.AttemptID).Status)
}

// TestProgressIsOneStatement checks, with the pool's tracer, that a
// progress, accepted or refused, costs one statement outside any
// transaction and one round trip (the gateway's zero now, the database
// clock, is exercised by every gateway and stack test).
func TestProgressIsOneStatement(t *testing.T) {
	t.Parallel()
	b := setup(t, server.Config{})
	b.createJob(t, t0, nil)
	offer := b.lease(t, t0, deviceID)
	c := store.DBCounter(b.pool)
	require.NotNil(t, c)
	before := c.Snapshot()[server.OpProgress]
	now := t0.Add(5 * time.Second)
	require.Equal(t, protocol.CodeProgressOK, b.progress(t, now, deviceID, offer, protocol.AttemptRunning).Code)
	stale := offer
	stale.LeaseEpoch = 2
	require.Equal(t, protocol.Reply{Code: protocol.CodeLeaseConflict, Reason: protocol.ReasonIdentityMismatch},
		b.progress(t, now, deviceID, stale, protocol.AttemptRunning))
	got := c.Snapshot()[server.OpProgress].Sub(before)
	require.Equal(t, dbstat.Counts{Outside: 2, RoundTrips: 2}, got, "two progresses, one statement each")

	require.Equal(t, protocol.AttemptRunning, b.attempt(t, offer.AttemptID).Status, "the refused progress wrote nothing")
}
