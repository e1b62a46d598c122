package store_test

import (
	"context"
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/store"
)

const (
	buyerID  = "00000000-0000-4000-8000-0000000000b1"
	deviceID = "00000000-0000-4000-8000-0000000000d1"
	jobID    = "00000000-0000-4000-8000-00000000000a"
	sha      = "0000000000000000000000000000000000000000000000000000000000000000"
)

var t0 = time.Date(2030, 1, 2, 3, 4, 5, 6000, time.UTC)

// seedQueuedJob writes a consistent state by hand: one buyer with a queued
// job, its hold and its journal row, and one device.
func seedQueuedJob(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	ctx := context.Background()
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO buyers (id, name, balance_cents, initial_cents) VALUES ($1, 'b', 90, 100)`, []any{buyerID}},
		{`INSERT INTO jobs (id, buyer_id, service, input_bytes, input_sha256, max_attempts, status,
		   request_fingerprint, created_at, admission_deadline, updated_at)
		 VALUES ($2, $1, 'synthetic.mp4', 1, $4, 3, 'queued', $4, $3::timestamptz, $3::timestamptz + interval '1 hour', $3)`,
			[]any{buyerID, jobID, t0, sha}},
		{`INSERT INTO holds (job_id, buyer_id, amount_cents, status, created_at) VALUES ($2, $1, 10, 'held', $3)`,
			[]any{buyerID, jobID, t0}},
		{`INSERT INTO job_events (kind, job_id, to_status, actor, at) VALUES ('job', $1, 'queued', 'buyer', $2)`,
			[]any{jobID, t0}},
		{`INSERT INTO devices (id, name, services, slots_total) VALUES ($1, 'd', '{synthetic.mp4}', 1)`,
			[]any{deviceID}},
	} {
		_, err := pool.Exec(ctx, q.sql, q.args...)
		require.NoError(t, err, q.sql)
	}
}

// poolWithLeasedAttempt is a fresh database holding the queued job and
// one leased attempt of it (attemptA1).
func poolWithLeasedAttempt(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool := newPool(t)
	seedQueuedJob(t, pool)
	require.NoError(t, insertAttempt(context.Background(), pool, attemptA1, 1, sha))
	return pool
}

// attemptA1 is poolWithLeasedAttempt's attempt.
const attemptA1 = "00000000-0000-4000-8000-0000000000a1"

func insertAttempt(ctx context.Context, pool *pgxpool.Pool, id string, number int, hash string) error {
	_, err := pool.Exec(ctx, `INSERT INTO job_attempts (id, job_id, attempt_number, device_id, status, lease_epoch,
		commit_token_hash, lease_expires_at, created_at) VALUES ($1, $2, $3, $4, 'leased', 1, $5, $6, $6)`,
		id, jobID, number, deviceID, hash, t0)
	return err
}

func pgCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code + " " + pe.ConstraintName
	}
	return ""
}

func TestMigrateTwiceIsANoop(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	require.NoError(t, store.Migrate(context.Background(), pool.Config().ConnString()))
}

// The SQL copy of SPEC section 2's tables must be exactly the protocol's.
func TestTransitionTablesMatchProtocol(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	ctx := context.Background()
	allowed := func(entity, from, to string) bool {
		var ok bool
		require.NoError(t, pool.QueryRow(ctx, `SELECT status_transition_allowed($1, $2, $3)`, entity, from, to).Scan(&ok))
		return ok
	}
	for _, from := range protocol.JobStatuses {
		for _, to := range protocol.JobStatuses {
			want := protocol.AssertJobTransition(from, to) == nil
			require.Equal(t, want, allowed("job", string(from), string(to)), "%s -> %s", from, to)
		}
	}
	for _, from := range protocol.AttemptStatuses {
		for _, to := range protocol.AttemptStatuses {
			want := protocol.AssertAttemptTransition(from, to) == nil
			require.Equal(t, want, allowed("attempt", string(from), string(to)), "%s -> %s", from, to)
		}
	}
}

// The status triggers hold SPEC section 2's tables inline, as arrays of
// "from>to" in their WHEN clauses (migration 00004), so that a legal write
// never enters plpgsql. Those arrays must be exactly the protocol's tables,
// and the status domains exactly the protocol's statuses and codes.
func TestTriggerArraysAndDomainsMatchProtocol(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	ctx := context.Background()
	array := regexp.MustCompile(`'\{([^}]*)\}'::text\[\]`)
	pairs := func(trigger string) map[string]bool {
		var def string
		require.NoError(t, pool.QueryRow(ctx, `SELECT pg_get_triggerdef(oid) FROM pg_trigger WHERE tgname = $1`, trigger).Scan(&def))
		m := array.FindStringSubmatch(def)
		require.NotNil(t, m, "no transition array in %s: %s", trigger, def)
		got := map[string]bool{}
		for _, p := range strings.Split(m[1], ",") {
			got[p] = true
		}
		return got
	}
	want := map[string]bool{}
	for _, from := range protocol.JobStatuses {
		for _, to := range protocol.JobStatuses {
			if from != to && protocol.AssertJobTransition(from, to) == nil {
				want[string(from)+">"+string(to)] = true
			}
		}
	}
	require.Equal(t, want, pairs("jobs_status_transition"))
	want = map[string]bool{}
	for _, from := range protocol.AttemptStatuses {
		for _, to := range protocol.AttemptStatuses {
			if from != to && protocol.AssertAttemptTransition(from, to) == nil {
				want[string(from)+">"+string(to)] = true
			}
		}
	}
	require.Equal(t, want, pairs("job_attempts_status_transition"))

	quoted := regexp.MustCompile(`'([a-z_]+)'::text`)
	values := func(domain string) []string {
		var def string
		require.NoError(t, pool.QueryRow(ctx, `SELECT pg_get_constraintdef(c.oid) FROM pg_constraint c
			JOIN pg_type ty ON ty.oid = c.contypid WHERE ty.typname = $1`, domain).Scan(&def))
		var got []string
		for _, m := range quoted.FindAllStringSubmatch(def, -1) {
			got = append(got, m[1])
		}
		return got
	}
	asStrings := func(n int, at func(int) string) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = at(i)
		}
		return out
	}
	require.ElementsMatch(t, asStrings(len(protocol.JobStatuses), func(i int) string { return string(protocol.JobStatuses[i]) }), values("job_status"))
	require.ElementsMatch(t, asStrings(len(protocol.AttemptStatuses), func(i int) string { return string(protocol.AttemptStatuses[i]) }), values("attempt_status"))
	codes := asStrings(len(protocol.FailureCodes), func(i int) string { return string(protocol.FailureCodes[i]) })
	// An attempt may end offer_withdrawn, a job admission_expired: the
	// control plane's own codes, each where it can stand.
	require.ElementsMatch(t, append(slices.Clone(codes), string(protocol.FailOfferWithdrawn)), values("attempt_failure_code"))
	require.ElementsMatch(t, append(codes, string(protocol.FailAdmissionExpired)), values("job_failure_code"))
}

// Every value rule that moved into a domain still refuses a bad write.
func TestDomainsRefuseBadValues(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	seedQueuedJob(t, pool)
	ctx := context.Background()
	for _, q := range []string{
		`UPDATE jobs SET output_sha256 = 'XYZ' WHERE id = $1`,
		`UPDATE jobs SET request_fingerprint = repeat('G', 64) WHERE id = $1`,
		`UPDATE jobs SET status = 'lost' WHERE id = $1`,
		`UPDATE jobs SET failure_code = 'tired' WHERE id = $1`,
	} {
		_, err := pool.Exec(ctx, q, jobID)
		require.Contains(t, pgCode(err), "23514", "%s must be refused: %v", q, err)
	}
	require.Contains(t, pgCode(insertAttempt(ctx, pool, "00000000-0000-4000-8000-0000000000a1", 1, "not-a-hash")), "23514")
	_, err := pool.Exec(ctx, `INSERT INTO jobs (id, buyer_id, service, input_bytes, input_sha256, max_attempts, status,
		request_fingerprint, created_at, admission_deadline, updated_at)
		SELECT gen_random_uuid(), buyer_id, service, 1, input_sha256, 3, 'active', request_fingerprint,
		       created_at, admission_deadline, updated_at FROM jobs WHERE id = $1`, jobID)
	require.Equal(t, "23514 ", pgCode(err), "a job inserted active must be refused: %v", err)
}

func TestTriggerRefusesIllegalTransitions(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	seedQueuedJob(t, pool)
	ctx := context.Background()
	_, err := pool.Exec(ctx, `UPDATE jobs SET status = 'verifying' WHERE id = $1`, jobID)
	require.Equal(t, "23514 ", pgCode(err), "queued -> verifying must be refused: %v", err)
	_, err = pool.Exec(ctx, `UPDATE jobs SET status = 'cancelling' WHERE id = $1`, jobID)
	require.Error(t, err, "queued -> cancelling is not in the table")
	require.NoError(t, insertAttempt(ctx, pool, attemptA1, 1, sha))
	_, err = pool.Exec(ctx, `UPDATE job_attempts SET status = 'committing' WHERE job_id = $1`, jobID)
	require.Equal(t, "23514 ", pgCode(err), "leased -> committing must be refused: %v", err)
	_, err = pool.Exec(ctx, `INSERT INTO job_events (kind, job_id, to_status, actor, at)
		VALUES ('job', $1, 'queued', 'nobody', now())`, jobID)
	require.Contains(t, pgCode(err), "23514", "unknown actor")
}

// The database itself refuses a second live attempt for one job.
func TestDatabaseRefusesSecondLiveAttempt(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	seedQueuedJob(t, pool)
	ctx := context.Background()
	require.NoError(t, insertAttempt(ctx, pool, "00000000-0000-4000-8000-0000000000a1", 1,
		protocol.HashCommitToken("one")))
	err := insertAttempt(ctx, pool, "00000000-0000-4000-8000-0000000000a2", 2, protocol.HashCommitToken("two"))
	require.Equal(t, "23505 job_attempts_one_live_idx", pgCode(err))

	// Once the first attempt is no longer live, a second one is accepted.
	_, err = pool.Exec(ctx, `UPDATE job_attempts SET status = 'lost', ended_at = now() WHERE job_id = $1`, jobID)
	require.NoError(t, err)
	require.NoError(t, insertAttempt(ctx, pool, "00000000-0000-4000-8000-0000000000a2", 2,
		protocol.HashCommitToken("two")))
}

// TestUnendedIsLive checks what the live-attempt indexes of 00007 rest on:
// an attempt row whose ended_at is null has a live status and one whose
// ended_at is set a terminal one; every other pair is refused.
func TestUnendedIsLive(t *testing.T) {
	t.Parallel()
	pool := poolWithLeasedAttempt(t)
	ctx := context.Background()
	_, err := pool.Exec(ctx, `UPDATE job_attempts SET ended_at = now() WHERE job_id = $1`, jobID)
	require.Contains(t, pgCode(err), "23514", "a live attempt with ended_at: %v", err)
	_, err = pool.Exec(ctx, `UPDATE job_attempts SET status = 'lost' WHERE job_id = $1`, jobID)
	require.Contains(t, pgCode(err), "23514", "an ended attempt without ended_at: %v", err)
	_, err = pool.Exec(ctx, `INSERT INTO job_attempts (id, job_id, attempt_number, device_id, status, lease_epoch,
		commit_token_hash, lease_expires_at, created_at, ended_at) VALUES ($1, $2, 2, $3, 'leased', 1, $4, $5, $5, $5)`,
		"00000000-0000-4000-8000-0000000000a2", jobID, deviceID, protocol.HashCommitToken("two"), t0)
	require.Contains(t, pgCode(err), "23514", "an attempt inserted with ended_at: %v", err)
}

// TestPhaseChangesAreHOT checks the point of 00007: a progress frame's
// write (a phase change and a renewal) and commit transaction 1's write
// update the attempt in place, without index entries, and only its end
// does not. pg_stat_get_xact_tuples_hot_updated counts this transaction's.
func TestPhaseChangesAreHOT(t *testing.T) {
	t.Parallel()
	pool := poolWithLeasedAttempt(t)
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	counts := func() (updated, hot int) {
		require.NoError(t, tx.QueryRow(ctx, `SELECT pg_stat_get_xact_tuples_updated('job_attempts'::regclass),
			pg_stat_get_xact_tuples_hot_updated('job_attempts'::regclass)`).Scan(&updated, &hot))
		return updated, hot
	}
	for _, q := range []string{
		`UPDATE job_attempts SET status = 'downloading', lease_expires_at = lease_expires_at + interval '1 second' WHERE job_id = $1`,
		`UPDATE job_attempts SET status = 'uploading', lease_expires_at = lease_expires_at + interval '1 second' WHERE job_id = $1`,
		`UPDATE job_attempts SET status = 'committing', claimed_output_key = 'k', claimed_output_bytes = 1,
		 claimed_output_sha256 = repeat('b', 64), lease_expires_at = lease_expires_at + interval '1 second' WHERE job_id = $1`,
	} {
		_, err := tx.Exec(ctx, q, jobID)
		require.NoError(t, err, q)
	}
	updated, hot := counts()
	require.Equal(t, 3, updated)
	require.Equal(t, 3, hot, "phase changes and renewals must be HOT")
	_, err = tx.Exec(ctx, `UPDATE job_attempts SET status = 'succeeded', ended_at = now() WHERE job_id = $1`, jobID)
	require.NoError(t, err)
	updated, hot = counts()
	require.Equal(t, 4, updated)
	require.Equal(t, 3, hot, "the end leaves the live indexes, so it cannot be HOT")
}

func TestSnapshotProjectsRows(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	ctx := context.Background()
	snap, err := store.Snapshot(ctx, pool)
	require.NoError(t, err)
	require.Equal(t, protocol.Snapshot{}, snap)

	seedQueuedJob(t, pool)
	snap, err = store.Snapshot(ctx, pool)
	require.NoError(t, err)
	require.Equal(t, []protocol.JobRow{{ID: jobID, BuyerID: buyerID, Service: "synthetic.mp4",
		Status: protocol.JobQueued, MaxAttempts: 3, CreatedAt: t0, AdmissionDeadline: t0.Add(time.Hour),
		HoldStatus: protocol.HoldHeld, HoldCents: 10}}, snap.Jobs)
	require.Equal(t, []protocol.BuyerRow{{ID: buyerID, BalanceCents: 90, HeldCents: 10}}, snap.Buyers)
	require.Equal(t, []protocol.DeviceRow{{ID: deviceID, Status: protocol.DeviceOffline}}, snap.Devices)
	require.Equal(t, []protocol.EventRow{{Kind: "job", JobID: jobID, To: "queued", Actor: protocol.ActorBuyer,
		At: t0}}, snap.Journal)
}

func TestCheckInvariantsFindsBrokenRows(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	ctx := context.Background()
	seedQueuedJob(t, pool)
	v, err := store.CheckInvariants(ctx, pool)
	require.NoError(t, err)
	require.Empty(t, v)

	// Money appears from nowhere, and the job changes without a journal row.
	_, err = pool.Exec(ctx, `UPDATE buyers SET balance_cents = balance_cents + 1`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `UPDATE jobs SET status = 'failed', failure_code = 'runner_failed' WHERE id = $1`, jobID)
	require.NoError(t, err)
	v, err = store.CheckInvariants(ctx, pool)
	require.NoError(t, err)
	got := map[int]bool{}
	for _, x := range v {
		got[x.Invariant] = true
	}
	require.Equal(t, map[int]bool{4: true, 7: true}, got, "%v", v)
}
