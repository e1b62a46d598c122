package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server"
)

func (b *bundle) sweep(t *testing.T, now time.Time) protocol.SweepResult {
	t.Helper()
	res, err := b.svc.Sweep(context.Background(), now)
	require.NoError(t, err)
	return res
}

func TestSweepLostRequeued(t *testing.T) {
	t.Parallel()
	b := setup(t, server.Config{})
	b.createJob(t, t0, nil)
	offer := b.lease(t, t0, deviceID)
	require.Equal(t, protocol.SweepResult{}, b.sweep(t, t0.Add(ttl-time.Microsecond)), "nothing expired yet")
	require.Equal(t, protocol.SweepResult{Lost: 1, Requeued: 1}, b.sweep(t, t0.Add(ttl)))
	require.Equal(t, protocol.JobQueued, b.job(t, offer.JobID).Status)
	a := b.attempt(t, offer.AttemptID)
	require.Equal(t, protocol.AttemptLost, a.Status)
	require.Equal(t, protocol.FailLeaseExpired, a.FailureCode)
	journal := b.journalOf(t, offer.JobID)
	require.Equal(t, []string{"attempt leased->lost lease_expired sweeper", "job active->queued  sweeper"},
		journal[len(journal)-2:])
	require.Equal(t, 0, b.snapshot(t).Devices[0].LiveAttempts)
}

func TestSweepLostFailed(t *testing.T) {
	t.Parallel()
	b := setup(t, server.Config{})
	spent := b.createJob(t, t0, func(r *protocol.CreateJobRequest) { r.MaxAttempts = 1 })
	late := b.createJob(t, t0, func(r *protocol.CreateJobRequest) { r.AdmissionWindow = ttl })
	b.lease(t, t0, deviceID)
	b.lease(t, t0, deviceID)
	require.Equal(t, protocol.SweepResult{Lost: 2, Failed: 2}, b.sweep(t, t0.Add(ttl)))
	for _, id := range []string{spent, late} {
		j := b.job(t, id)
		require.Equal(t, protocol.JobFailed, j.Status)
		require.Equal(t, protocol.FailLeaseExpired, j.FailureCode)
		require.Equal(t, protocol.HoldReleased, j.HoldStatus)
	}
}

func TestSweepLostCancelling(t *testing.T) {
	t.Parallel()
	b := setup(t, server.Config{})
	b.createJob(t, t0, nil)
	offer := b.lease(t, t0, deviceID)
	_, err := b.svc.Cancel(context.Background(), t0, buyerID, offer.JobID)
	require.NoError(t, err)
	require.Equal(t, protocol.SweepResult{Lost: 1, Cancelled: 1}, b.sweep(t, t0.Add(ttl)))
	require.Equal(t, protocol.JobCancelled, b.job(t, offer.JobID).Status)
	require.Equal(t, protocol.AttemptLost, b.attempt(t, offer.AttemptID).Status)
}

// A server that died between the commit transactions: the sweeper verifies
// each abandoned commit again and finishes it, whatever it finds.
func TestSweepReverifiesAbandonedCommits(t *testing.T) {
	t.Parallel()
	b := setup(t, server.Config{})
	ctx := context.Background()
	good, goodCommit := b.uploaded(t, t0)
	bad, badCommit := b.uploaded(t, t0)
	badCommit.Output.Bytes++
	cancelled, cancelledCommit := b.uploaded(t, t0)
	for _, c := range []protocol.Commit{goodCommit, badCommit, cancelledCommit} {
		r, err := b.svc.CommitBegin(ctx, t0, deviceID, c)
		require.NoError(t, err)
		require.Equal(t, protocol.CodeCommitPending, r.Code)
	}
	r, err := b.svc.Cancel(ctx, t0, buyerID, cancelled.JobID)
	require.NoError(t, err)
	require.Equal(t, protocol.CodeCancelling, r.Code)

	require.Equal(t, protocol.SweepResult{}, b.sweep(t, t0.Add(ttl-time.Microsecond)), "verification deadline not reached")
	require.Equal(t, protocol.SweepResult{Reverified: 3, Succeeded: 1, Failed: 1, Cancelled: 1}, b.sweep(t, t0.Add(ttl)))
	require.Equal(t, protocol.JobSucceeded, b.job(t, good.JobID).Status)
	require.Equal(t, protocol.FailVerificationFailed, b.job(t, bad.JobID).FailureCode)
	require.Equal(t, protocol.JobCancelled, b.job(t, cancelled.JobID).Status)
	journal := b.journalOf(t, good.JobID)
	require.Equal(t, []string{"attempt committing->succeeded  sweeper", "job verifying->succeeded  sweeper"},
		journal[len(journal)-2:])
	require.Equal(t, protocol.SweepResult{}, b.sweep(t, t0.Add(ttl)), "a second sweep finds nothing")
}

// A store I/O error is not a verification failure: the attempt stays
// committing until a sweep can read the store again.
func TestSweepRetriesVerificationAfterStoreError(t *testing.T) {
	t.Parallel()
	b := setup(t, server.Config{})
	ctx := context.Background()
	offer, c := b.uploaded(t, t0)
	b.store.broken.Store(true)
	_, err := b.svc.Commit(ctx, t0, deviceID, c)
	require.ErrorIs(t, err, errDiskGone)
	require.Equal(t, protocol.AttemptCommitting, b.attempt(t, offer.AttemptID).Status)
	require.Equal(t, protocol.JobVerifying, b.job(t, offer.JobID).Status)

	res, err := b.svc.Sweep(ctx, t0.Add(ttl))
	require.ErrorIs(t, err, errDiskGone)
	require.Equal(t, protocol.SweepResult{}, res)
	require.Equal(t, protocol.AttemptCommitting, b.attempt(t, offer.AttemptID).Status)

	b.store.broken.Store(false)
	require.Equal(t, protocol.SweepResult{Reverified: 1, Succeeded: 1}, b.sweep(t, t0.Add(ttl)))
	require.Equal(t, protocol.JobSucceeded, b.job(t, offer.JobID).Status)
}

func TestSweepAdmissionExpired(t *testing.T) {
	t.Parallel()
	b := setup(t, server.Config{})
	id := b.createJob(t, t0, func(r *protocol.CreateJobRequest) { r.AdmissionWindow = time.Minute })
	require.Equal(t, protocol.SweepResult{}, b.sweep(t, t0.Add(time.Minute-time.Microsecond)))
	require.Equal(t, protocol.SweepResult{AdmissionExpired: 1, Failed: 1}, b.sweep(t, t0.Add(time.Minute)))
	j := b.job(t, id)
	require.Equal(t, protocol.JobFailed, j.Status)
	require.Equal(t, protocol.FailAdmissionExpired, j.FailureCode)
	require.Equal(t, protocol.HoldReleased, j.HoldStatus)
	require.Equal(t, []string{"job ->queued  buyer", "job queued->failed admission_expired sweeper"}, b.journalOf(t, id))
}

func TestSweepOfflineDevices(t *testing.T) {
	t.Parallel()
	b := setup(t, server.Config{HeartbeatWindow: time.Minute})
	r, err := b.svc.Lease(context.Background(), t0, deviceID) // no_job, but a heartbeat
	require.NoError(t, err)
	require.Equal(t, protocol.CodeNoJob, r.Code)
	require.Equal(t, protocol.SweepResult{}, b.sweep(t, t0.Add(time.Minute-time.Microsecond)))
	require.Equal(t, protocol.SweepResult{Offline: 1}, b.sweep(t, t0.Add(time.Minute)),
		"never-seen devices are already offline")
	require.Equal(t, protocol.DeviceOffline, b.snapshot(t).Devices[0].Status)
	require.Equal(t, protocol.SweepResult{}, b.sweep(t, t0.Add(time.Hour)))
}
