package fencing_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/fencing"
)

// Revoking a device nobody has is an error of the admin call (the leases of
// a revoked device are the conformance suite's LeaseNotFound).
func TestRevokeDeviceNotFound(t *testing.T) {
	t.Parallel()
	b := setup(t, fencing.Config{})
	require.ErrorIs(t, b.svc.RevokeDevice(context.Background(), missingID), fencing.ErrNotFound)
}

// The database, not only the code, refuses a second live attempt for a job.
func TestDatabaseRefusesSecondLiveAttempt(t *testing.T) {
	t.Parallel()
	b := setup(t, fencing.Config{})
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
