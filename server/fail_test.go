package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server"
)

func TestFailRequeued(t *testing.T) {
	t.Parallel()
	b := setup(t, server.Config{})
	b.createJob(t, t0, nil)
	offer := b.lease(t, t0, deviceID)
	// Past the lease's expiry but not yet swept: failing is still allowed.
	r, err := b.svc.Fail(context.Background(), t0.Add(ttl), deviceID, failOf(offer, protocol.FailDownloadFailed))
	require.NoError(t, err)
	require.Equal(t, protocol.Reply{Code: protocol.CodeFailOK, Requeued: true}, r)
	j := b.job(t, offer.JobID)
	require.Equal(t, protocol.JobQueued, j.Status)
	require.Equal(t, protocol.HoldHeld, j.HoldStatus)
	require.Zero(t, j.Webhooks)
	a := b.attempt(t, offer.AttemptID)
	require.Equal(t, protocol.AttemptFailed, a.Status)
	require.Equal(t, protocol.FailDownloadFailed, a.FailureCode)
	journal := b.journalOf(t, offer.JobID)
	require.Equal(t, []string{"attempt leased->failed download_failed device", "job active->queued  device"},
		journal[len(journal)-2:])
}

func TestFailNotRequeued(t *testing.T) {
	t.Parallel()
	b := setup(t, server.Config{})
	ctx := context.Background()
	cases := []struct {
		name string
		edit func(*protocol.CreateJobRequest)
		code protocol.FailureCode
		at   time.Duration
	}{
		{"not retryable", nil, protocol.FailRunnerFailed, 0},
		{"budget spent", func(r *protocol.CreateJobRequest) { r.MaxAttempts = 1 }, protocol.FailNoCapacity, 0},
		{"deadline passed", func(r *protocol.CreateJobRequest) { r.AdmissionWindow = time.Second }, protocol.FailInternalError, time.Second},
	}
	for _, c := range cases {
		b.createJob(t, t0, c.edit)
		offer := b.lease(t, t0, deviceID)
		r, err := b.svc.Fail(ctx, t0.Add(c.at), deviceID, failOf(offer, c.code))
		require.NoError(t, err)
		require.Equal(t, protocol.Reply{Code: protocol.CodeFailOK}, r, c.name)
		j := b.job(t, offer.JobID)
		require.Equal(t, protocol.JobFailed, j.Status, c.name)
		require.Equal(t, c.code, j.FailureCode, c.name)
		require.Equal(t, protocol.HoldReleased, j.HoldStatus, c.name)
		require.Equal(t, 1, j.Webhooks, c.name)
	}
}

func TestFailWhileCancelling(t *testing.T) {
	t.Parallel()
	b := setup(t, server.Config{})
	ctx := context.Background()
	b.createJob(t, t0, nil)
	offer := b.lease(t, t0, deviceID)
	_, err := b.svc.Cancel(ctx, t0, buyerID, offer.JobID)
	require.NoError(t, err)
	r, err := b.svc.Fail(ctx, t0, deviceID, failOf(offer, protocol.FailNoCapacity))
	require.NoError(t, err)
	require.Equal(t, protocol.Reply{Code: protocol.CodeFailOK}, r)
	j := b.job(t, offer.JobID)
	require.Equal(t, protocol.JobCancelled, j.Status)
	require.Empty(t, j.FailureCode)
}

func TestFailConflict(t *testing.T) {
	t.Parallel()
	b := setup(t, server.Config{})
	ctx := context.Background()
	offer, c := b.uploaded(t, t0)
	edits := map[string]func(*protocol.Fail) string{
		"foreign device": func(*protocol.Fail) string { return otherDevice },
		"wrong epoch":    func(f *protocol.Fail) string { f.LeaseEpoch = 2; return deviceID },
		"wrong token":    func(f *protocol.Fail) string { f.CommitToken = "guess"; return deviceID },
		"missing job":    func(f *protocol.Fail) string { f.JobID = missingID; return deviceID },
		"wrong attempt":  func(f *protocol.Fail) string { f.AttemptID = missingID; return deviceID },
	}
	before := b.snapshot(t)
	for name, edit := range edits {
		f := failOf(offer, protocol.FailUploadFailed)
		device := edit(&f)
		r, err := b.svc.Fail(ctx, t0, device, f)
		require.NoError(t, err)
		require.Equal(t, protocol.Reply{Code: protocol.CodeFailConflict}, r, name)
	}
	require.Equal(t, before, b.snapshot(t))

	// Not in a lease phase: a committing attempt can no longer fail.
	r, err := b.svc.CommitBegin(ctx, t0, deviceID, c)
	require.NoError(t, err)
	require.Equal(t, protocol.CodeCommitPending, r.Code)
	r, err = b.svc.Fail(ctx, t0, deviceID, failOf(offer, protocol.FailUploadFailed))
	require.NoError(t, err)
	require.Equal(t, protocol.Reply{Code: protocol.CodeFailConflict}, r)
	require.Equal(t, protocol.AttemptCommitting, b.attempt(t, offer.AttemptID).Status)
}

func TestFailBadFailureCode(t *testing.T) {
	t.Parallel()
	b := setup(t, server.Config{})
	b.createJob(t, t0, nil)
	offer := b.lease(t, t0, deviceID)
	for _, code := range []protocol.FailureCode{"", "exploded", protocol.FailAdmissionExpired} {
		// The code is checked before the identity: even a foreign device
		// gets bad_failure_code.
		r, err := b.svc.Fail(context.Background(), t0, otherDevice, failOf(offer, code))
		require.NoError(t, err)
		require.Equal(t, protocol.Reply{Code: protocol.CodeBadFailureCode}, r, code)
	}
	require.Equal(t, protocol.AttemptLeased, b.attempt(t, offer.AttemptID).Status)
}
