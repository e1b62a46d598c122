package fencing_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/internal/mp4"
	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/fencing"
	"github.com/rendermac/rendermac/server/store"
)

// The race tests drive the service's concurrency-critical pairs many times
// on one fresh database each: cancel against commit, two devices against
// one queued job, and the sweeper against a commit at the lease's expiry.
// Every round checks the outcome pairing the semantics allow, that no
// serialization failure or deadlock escapes as an error (retries are fine
// and are logged from Stats), and SPEC section 4 over all rows.

const (
	raceRounds = 200
	// raceBuyer can pay for every round (setup's buyers cannot: 200 jobs
	// at 10 cents exceed their 1000).
	raceBuyer   = "00000000-0000-4000-8000-0000000000c1"
	raceDeviceA = "00000000-0000-4000-8000-0000000000e1"
	raceDeviceB = "00000000-0000-4000-8000-0000000000e2"
)

// raceSetup is setup plus a rich buyer and two single-slot devices.
func raceSetup(t *testing.T) *bundle {
	t.Helper()
	b := setup(t, fencing.Config{})
	ctx := context.Background()
	require.NoError(t, b.svc.CreateBuyer(ctx, raceBuyer, "race", 1_000_000))
	for _, d := range []string{raceDeviceA, raceDeviceB} {
		require.NoError(t, b.svc.CreateDevice(ctx, d, "race", []string{"synthetic.mp4"}, 1, ""))
	}
	return b
}

// roundNow is round r's instant. Rounds are a minute apart, longer than a
// lease, so an earlier round's times never fall into a later one's.
func roundNow(r int) time.Time { return t0.Add(time.Duration(r) * time.Minute) }

func (b *bundle) raceJob(t *testing.T, now time.Time, maxAttempts int) string {
	t.Helper()
	return b.createJob(t, now, func(r *protocol.CreateJobRequest) {
		r.BuyerID = raceBuyer
		r.MaxAttempts = maxAttempts
	})
}

// raceUploaded creates a job, leases it on dev at now, reports uploading at
// progressAt (so the lease expires at progressAt + ttl) and stores a valid
// MP4 at the attempt's key.
func (b *bundle) raceUploaded(t *testing.T, now, progressAt time.Time, dev string, maxAttempts int) (protocol.Reply, protocol.Commit) {
	t.Helper()
	b.raceJob(t, now, maxAttempts)
	offer := b.lease(t, now, dev)
	r := b.progress(t, progressAt, dev, offer, protocol.AttemptUploading)
	require.Equal(t, protocol.CodeProgressOK, r.Code, "%+v", r)
	out := b.put(t, offer, mp4.Synthetic(mp4.SyntheticParams{Seed: offer.AttemptID}))
	return offer, commitOf(offer, out)
}

// statuses reads the job's and the attempt's status straight from the rows.
func (b *bundle) statuses(t *testing.T, jobID, attemptID string) (protocol.JobStatus, protocol.AttemptStatus) {
	t.Helper()
	var j protocol.JobStatus
	var a protocol.AttemptStatus
	require.NoError(t, b.pool.QueryRow(context.Background(),
		`SELECT j.status, a.status FROM jobs j JOIN job_attempts a ON a.job_id = j.id WHERE j.id = $1 AND a.id = $2`,
		jobID, attemptID).Scan(&j, &a))
	return j, a
}

// liveAttempts lists the devices of the job's live attempts.
func (b *bundle) liveAttempts(t *testing.T, jobID string) []string {
	t.Helper()
	rows, err := b.pool.Query(context.Background(), `
SELECT device_id::text FROM job_attempts
WHERE job_id = $1 AND status IN ('leased', 'downloading', 'running', 'uploading', 'committing')`, jobID)
	require.NoError(t, err)
	var out []string
	for rows.Next() {
		var d string
		require.NoError(t, rows.Scan(&d))
		out = append(out, d)
	}
	require.NoError(t, rows.Err())
	return out
}

// roundInvariants is SPEC section 4 over every row, plus the one journal
// row that must never exist: a job going cancelling -> succeeded.
func (b *bundle) roundInvariants(t *testing.T, round int) {
	t.Helper()
	ctx := context.Background()
	v, err := store.CheckInvariants(ctx, b.pool)
	require.NoError(t, err)
	require.Empty(t, v, "round %d: invariant violations", round)
	var n int
	require.NoError(t, b.pool.QueryRow(ctx, `
SELECT count(*) FROM job_events WHERE kind = 'job' AND from_status = 'cancelling' AND to_status = 'succeeded'`).Scan(&n))
	require.Zero(t, n, "round %d: the journal has a job row cancelling -> succeeded", round)
}

// noEscape fails on any error, and names a serialization failure or a
// deadlock explicitly: those must be retried inside the service, never
// returned.
func noEscape(t *testing.T, round int, op string, err error) {
	t.Helper()
	var pe *pgconn.PgError
	if errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01") {
		t.Fatalf("round %d: %s surfaced %s (%s) instead of retrying it", round, op, pe.Code, pe.Message)
	}
	require.NoError(t, err, "round %d: %s", round, op)
}

// tally counts outcomes by name, to show in the log that a race went both
// ways.
type tally map[string]int

func (c tally) String() string {
	return fmt.Sprint(map[string]int(c))
}

// Cancel races commit. Three shapes rotate: Cancel and the whole Commit
// released together; Cancel landing, deterministically, between CommitBegin
// and CommitFinish; and Cancel released right after CommitBegin so that it
// races verification and transaction 2. Whatever the interleaving, exactly
// one side wins and the replies agree with the rows:
//
//   - the commit's transaction 2 ran first: commit_ok, the cancel sees a
//     terminal job (job_terminal), job and attempt succeeded;
//   - the cancel locked the job first (active or verifying -> cancelling):
//     cancelling, and the commit's next transaction finds the job
//     cancelling and finalizes it (job_cancelled), job and attempt
//     cancelled.
//
// A job left cancelling would mean a commit gave up without finalizing, and
// commit_ok next to cancelling would mean a cancelling job succeeded; both
// fail the round.
func TestRaceCancelVersusCommit(t *testing.T) {
	t.Parallel()
	b := raceSetup(t)
	ctx := context.Background()
	seen := tally{}
	rng := rand.New(rand.NewPCG(1, 2)) // only the cancel's delay; used by this goroutine alone
	for round := range raceRounds {
		now := roundNow(round)
		offer, c := b.raceUploaded(t, now, now, raceDeviceA, 3)
		mode := round % 3
		var commitR, cancelR protocol.Reply
		var commitErr, cancelErr error
		var wg sync.WaitGroup
		switch mode {
		case 0: // Cancel and the whole Commit released by one channel.
			// Cancel is one short transaction and Commit three plus a
			// verification, so an undelayed cancel nearly always wins;
			// half the rounds hold the cancel back a random while (up to
			// about one commit's duration) so that commits win too.
			var delay time.Duration
			if round%2 == 0 {
				delay = time.Duration(rng.IntN(4000)) * time.Microsecond
			}
			start := make(chan struct{})
			wg.Go(func() { <-start; commitR, commitErr = b.svc.Commit(ctx, now, raceDeviceA, c) })
			wg.Go(func() {
				<-start
				time.Sleep(delay)
				cancelR, cancelErr = b.svc.Cancel(ctx, now, raceBuyer, offer.JobID)
			})
			close(start)
		case 1, 2: // Cancel released after transaction 1.
			begun, cancelled := make(chan struct{}), make(chan struct{})
			wg.Go(func() {
				var r protocol.Reply
				r, commitErr = b.svc.CommitBegin(ctx, now, raceDeviceA, c)
				close(begun)
				if commitErr != nil || r.Code != protocol.CodeCommitPending {
					commitR = r
					commitErr = errors.Join(commitErr, fmt.Errorf("commit_begin replied %+v", r))
					return
				}
				if mode == 1 {
					<-cancelled // the cancel lands between the two transactions
				}
				ok, err := b.svc.Verify(ctx, c.JobID, c.AttemptID)
				if err != nil {
					commitErr = err
					return
				}
				commitR, commitErr = b.svc.CommitFinish(ctx, now, c.JobID, c.AttemptID, ok)
			})
			wg.Go(func() {
				defer close(cancelled)
				<-begun
				cancelR, cancelErr = b.svc.Cancel(ctx, now, raceBuyer, offer.JobID)
			})
		}
		wg.Wait()
		noEscape(t, round, "commit", commitErr)
		noEscape(t, round, "cancel", cancelErr)

		job, att := b.statuses(t, offer.JobID, offer.AttemptID)
		pair := fmt.Sprintf("%s/%s -> %s/%s", commitR.Code, cancelR.Code, job, att)
		switch {
		case commitR.Code == protocol.CodeCommitOK && cancelR.Code == protocol.CodeJobTerminal:
			require.Equal(t, protocol.JobSucceeded, job, "round %d: %s", round, pair)
			require.Equal(t, protocol.AttemptSucceeded, att, "round %d: %s", round, pair)
			require.NotEqual(t, 1, mode, "round %d: a cancel between the transactions must win: %s", round, pair)
		case commitR.Code == protocol.CodeJobCancelled && cancelR.Code == protocol.CodeCancelling:
			require.Equal(t, protocol.JobCancelled, job, "round %d: %s", round, pair)
			require.Equal(t, protocol.AttemptCancelled, att, "round %d: %s", round, pair)
		default:
			t.Fatalf("round %d (mode %d): impossible outcome %s", round, mode, pair)
		}
		seen[fmt.Sprintf("mode%d:%s", mode, job)]++
		require.Empty(t, b.liveAttempts(t, offer.JobID), "round %d: a live attempt survived %s", round, pair)
		b.roundInvariants(t, round)
	}
	t.Logf("%d rounds, outcomes %v, retries %v", raceRounds, seen, b.svc.Stats().Retries)
}

// Two devices offering the service lease at once while exactly one job is
// queued: SKIP LOCKED gives it to one of them (lease_offer) and the other
// sees nothing to do (no_job, never no_slot: it has a free slot), and the
// job has exactly one live attempt, on the winner. Each round races twice,
// for attempt 1 and, after a retryable fail requeued the job, attempt 2;
// the job then fails for good so the next round starts with none queued.
func TestRaceTwoDevicesOneJob(t *testing.T) {
	t.Parallel()
	b := raceSetup(t)
	ctx := context.Background()
	wins := tally{}
	for round := range raceRounds {
		now := roundNow(round)
		jobID := b.raceJob(t, now, 3)
		for number, code := range []protocol.FailureCode{protocol.FailNoCapacity, protocol.FailRunnerFailed} {
			at := now.Add(time.Duration(number) * time.Second)
			devs := [2]string{raceDeviceA, raceDeviceB}
			if round%2 == 1 { // vary which goroutine is started first
				devs[0], devs[1] = devs[1], devs[0]
			}
			var replies [2]protocol.Reply
			var errs [2]error
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i, dev := range devs {
				wg.Go(func() { <-start; replies[i], errs[i] = b.svc.Lease(ctx, at, dev) })
			}
			close(start)
			wg.Wait()
			for i := range devs {
				noEscape(t, round, "lease on "+devs[i], errs[i])
			}
			winner := -1
			for i, r := range replies {
				switch r.Code {
				case protocol.CodeLeaseOffer:
					require.Equal(t, -1, winner, "round %d: both devices got an offer: %+v", round, replies)
					winner = i
				case protocol.CodeNoJob:
				default:
					t.Fatalf("round %d: device %s got %+v; want lease_offer or no_job", round, devs[i], r)
				}
			}
			require.NotEqual(t, -1, winner, "round %d: neither device got the job: %+v", round, replies)
			offer := replies[winner]
			require.Equal(t, jobID, offer.JobID, "round %d", round)
			require.Equal(t, number+1, offer.AttemptNumber, "round %d", round)
			require.Equal(t, []string{devs[winner]}, b.liveAttempts(t, jobID), "round %d: live attempts", round)
			wins[devs[winner][len(devs[winner])-2:]]++

			r, err := b.svc.Fail(ctx, at, devs[winner], failOf(offer, code))
			noEscape(t, round, "fail", err)
			require.Equal(t, protocol.CodeFailOK, r.Code, "round %d: %+v", round, r)
			require.Equal(t, number == 0, r.Requeued, "round %d: %+v", round, r)
		}
		b.roundInvariants(t, round)
	}
	t.Logf("%d rounds x 2 races, wins by device %v, retries %v", raceRounds, wins, b.svc.Stats().Retries)
}

// The sweeper races a commit at the lease's expiry E. Three shapes rotate:
//
//   - same instant: commit and sweep both at E. A lease expires at E
//     (lease_expires_at <= now), so the sweep always makes the attempt
//     lost, and the commit gets lease_expired (it locked first and saw the
//     expiry) or attempt_not_committable/lost (the sweep locked first).
//   - commit just before: commit at E-1µs, sweep at E. Either the commit's
//     transaction 1 locks first (commit_ok; the attempt is committing, with
//     its verification deadline renewed past E, so the sweep finds
//     nothing), or the sweep does (lost; attempt_not_committable/lost).
//   - re-verification: transaction 1 at E-1µs, then the sweep at the
//     verification deadline races verification and transaction 2; exactly
//     one of the two transactions 2 decides (commit_ok, or Reverified 1
//     with Succeeded 1) and the other finds nothing to commit.
//
// Jobs have one or three attempts, so a lost attempt fails or requeues its
// job; a requeued job is cancelled so the next round starts with none queued.
func TestRaceSweepVersusCommit(t *testing.T) {
	t.Parallel()
	b := raceSetup(t)
	ctx := context.Background()
	seen := tally{}
	for round := range raceRounds {
		now := roundNow(round)
		mode := round % 3
		maxAttempts := 1 + 2*((round/3)%2)
		progressAt := now.Add(time.Second)
		expiry := progressAt.Add(ttl)
		offer, c := b.raceUploaded(t, now, progressAt, raceDeviceA, maxAttempts)
		commitAt, sweepAt := expiry, expiry
		if mode != 0 {
			commitAt = expiry.Add(-time.Microsecond)
		}
		var commitR protocol.Reply
		var sweepR protocol.SweepResult
		var commitErr, sweepErr error
		start := make(chan struct{})
		var wg sync.WaitGroup
		if mode == 2 {
			r, err := b.svc.CommitBegin(ctx, commitAt, raceDeviceA, c)
			noEscape(t, round, "commit_begin", err)
			require.Equal(t, protocol.CodeCommitPending, r.Code, "round %d: %+v", round, r)
			sweepAt = commitAt.Add(ttl) // the verification deadline
			wg.Go(func() {
				<-start
				ok, err := b.svc.Verify(ctx, c.JobID, c.AttemptID)
				if err != nil {
					commitErr = err
					return
				}
				commitR, commitErr = b.svc.CommitFinish(ctx, commitAt, c.JobID, c.AttemptID, ok)
			})
		} else {
			wg.Go(func() { <-start; commitR, commitErr = b.svc.Commit(ctx, commitAt, raceDeviceA, c) })
		}
		wg.Go(func() { <-start; sweepR, sweepErr = b.svc.Sweep(ctx, sweepAt) })
		close(start)
		wg.Wait()
		noEscape(t, round, "commit", commitErr)
		noEscape(t, round, "sweep", sweepErr)

		job, att := b.statuses(t, offer.JobID, offer.AttemptID)
		desc := fmt.Sprintf("mode %d: commit %s/%s, sweep %+v -> job %s, attempt %s",
			mode, commitR.Code, commitR.Status, sweepR, job, att)
		lostJob := protocol.JobFailed
		if maxAttempts > 1 {
			lostJob = protocol.JobQueued
		}
		sweepLost := sweepR == protocol.SweepResult{Lost: 1, Requeued: boolInt(maxAttempts > 1), Failed: boolInt(maxAttempts == 1)}
		commitLost := commitR.Code == protocol.CodeAttemptNotCommittable && commitR.Status == protocol.AttemptLost
		var outcome string
		switch {
		case mode == 0 && sweepLost && (commitR.Code == protocol.CodeLeaseExpired || commitLost):
			outcome = "lost:" + string(commitR.Code)
		case mode == 1 && sweepLost && commitLost:
			outcome = "lost"
		case mode == 1 && commitR.Code == protocol.CodeCommitOK && sweepR == protocol.SweepResult{}:
			outcome = "committed"
		case mode == 2 && commitR.Code == protocol.CodeCommitOK && sweepR == protocol.SweepResult{}:
			outcome = "verifier"
		case mode == 2 && commitR.Code == protocol.CodeAttemptNotCommittable && commitR.Status == protocol.AttemptSucceeded &&
			sweepR == protocol.SweepResult{Reverified: 1, Succeeded: 1}:
			outcome = "sweeper"
		default:
			t.Fatalf("round %d: impossible outcome: %s", round, desc)
		}
		if outcome == "committed" || outcome == "verifier" || outcome == "sweeper" {
			require.Equal(t, protocol.JobSucceeded, job, "round %d: %s", round, desc)
			require.Equal(t, protocol.AttemptSucceeded, att, "round %d: %s", round, desc)
		} else {
			require.Equal(t, lostJob, job, "round %d: %s", round, desc)
			require.Equal(t, protocol.AttemptLost, att, "round %d: %s", round, desc)
		}
		seen[fmt.Sprintf("mode%d:%s", mode, outcome)]++
		require.Empty(t, b.liveAttempts(t, offer.JobID), "round %d: %s", round, desc)
		b.roundInvariants(t, round)
		if job == protocol.JobQueued {
			r, err := b.svc.Cancel(ctx, sweepAt, raceBuyer, offer.JobID)
			noEscape(t, round, "cancel", err)
			require.Equal(t, protocol.CodeCancelled, r.Code, "round %d: %+v", round, r)
		}
	}
	b.roundInvariants(t, raceRounds)
	t.Logf("%d rounds, outcomes %v, retries %v", raceRounds, seen, b.svc.Stats().Retries)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
