package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server"
)

func TestLeaseOffer(t *testing.T) {
	t.Parallel()
	b := setup(t, server.Config{})
	first := b.createJob(t, t0, nil)
	b.createJob(t, t0.Add(time.Second), nil)
	now := t0.Add(time.Minute)
	offer := b.lease(t, now, deviceID)
	require.Equal(t, first, offer.JobID, "the oldest queued job first")
	require.Equal(t, 1, offer.AttemptNumber)
	require.Equal(t, 1, offer.LeaseEpoch)
	require.Equal(t, now.Add(ttl), offer.LeaseExpiresAt)
	require.True(t, protocol.ValidID(offer.AttemptID))

	a := b.attempt(t, offer.AttemptID)
	require.Equal(t, protocol.AttemptRow{ID: offer.AttemptID, JobID: first, DeviceID: deviceID, Number: 1,
		Status: protocol.AttemptLeased, LeaseEpoch: 1, LeaseExpiresAt: now.Add(ttl),
		TokenHash: protocol.HashCommitToken(offer.CommitToken)}, a, "only the token's hash is stored")
	require.NotEqual(t, offer.CommitToken, a.TokenHash)
	j := b.job(t, first)
	require.Equal(t, protocol.JobActive, j.Status)
	require.Equal(t, 1, j.AttemptCount)
	d := b.snapshot(t).Devices[0]
	require.Equal(t, protocol.DeviceRow{ID: deviceID, Status: protocol.DeviceOnline, LiveAttempts: 1, LastSeenAt: now}, d)
	require.Equal(t, []string{"job ->queued  buyer", "attempt ->leased  matcher", "job queued->active  matcher"},
		b.journalOf(t, first))

	second := b.lease(t, now, deviceID)
	require.NotEqual(t, offer.CommitToken, second.CommitToken)
}

func TestLeaseNoJob(t *testing.T) {
	t.Parallel()
	b := setup(t, server.Config{})
	ctx := context.Background()
	r, err := b.svc.Lease(ctx, t0, deviceID)
	require.NoError(t, err)
	require.Equal(t, protocol.Reply{Code: protocol.CodeNoJob}, r)
	require.Equal(t, t0, b.snapshot(t).Devices[0].LastSeenAt, "no_job still heartbeats the device")

	// A job of a service the device does not offer, and one past its deadline.
	b.createJob(t, t0, func(r *protocol.CreateJobRequest) { r.Service = "ffmpeg.h264_720p" })
	b.createJob(t, t0, func(r *protocol.CreateJobRequest) { r.AdmissionWindow = time.Second })
	r, err = b.svc.Lease(ctx, t0.Add(time.Second), deviceID)
	require.NoError(t, err)
	require.Equal(t, protocol.Reply{Code: protocol.CodeNoJob}, r)
}

func TestLeaseNoSlot(t *testing.T) {
	t.Parallel()
	b := setup(t, server.Config{})
	b.createJob(t, t0, nil)
	b.createJob(t, t0, nil)
	b.lease(t, t0, otherDevice) // one slot
	r, err := b.svc.Lease(context.Background(), t0.Add(time.Second), otherDevice)
	require.NoError(t, err)
	require.Equal(t, protocol.Reply{Code: protocol.CodeNoSlot}, r)
	require.Equal(t, t0, b.snapshot(t).Devices[1].LastSeenAt, "no_slot comes before the heartbeat")
}

func TestLeaseNotFound(t *testing.T) {
	t.Parallel()
	b := setup(t, server.Config{})
	b.createJob(t, t0, nil)
	require.NoError(t, b.svc.RevokeDevice(context.Background(), otherDevice))
	for _, id := range []string{missingID, "nope", otherDevice} {
		r, err := b.svc.Lease(context.Background(), t0, id)
		require.NoError(t, err)
		require.Equal(t, protocol.Reply{Code: protocol.CodeNotFound}, r, id)
	}
	require.ErrorIs(t, b.svc.RevokeDevice(context.Background(), missingID), server.ErrNotFound)
}

// The database, not only the code, refuses a second live attempt for a job.
func TestDatabaseRefusesSecondLiveAttempt(t *testing.T) {
	t.Parallel()
	b := setup(t, server.Config{})
	b.createJob(t, t0, nil)
	offer := b.lease(t, t0, deviceID)
	_, err := b.pool.Exec(context.Background(), `INSERT INTO job_attempts (id, job_id, attempt_number, device_id,
		status, lease_epoch, commit_token_hash, lease_expires_at, created_at)
		VALUES ($1, $2, 2, $3, 'leased', 1, $4, $5, $5)`,
		missingID, offer.JobID, otherDevice, protocol.HashCommitToken("x"), t0)
	var pe *pgconn.PgError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, "23505", pe.Code)
	require.Equal(t, "job_attempts_one_live_idx", pe.ConstraintName)
}
