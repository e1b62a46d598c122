package controlplane_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/harness/deviceclient"
	"github.com/rendermac/rendermac/internal/mp4"
	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/faultpoint"
)

// A server SIGKILLed between the two commit transactions leaves the attempt
// committing and the job verifying, and the device without an answer. The
// restarted server (no fault armed) must finish the job exactly once: its
// sweeper re-verifies the abandoned commit after the verification deadline
// and runs transaction 2, whatever verification says (SPEC section 3).
func TestKillBetweenCommitTransactions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// corrupt claims a SHA-256 the uploaded bytes do not have.
		corrupt     bool
		job         protocol.JobStatus
		attempt     protocol.AttemptStatus
		failureCode string
		hold        string
	}{
		{name: "verified", job: protocol.JobSucceeded, attempt: protocol.AttemptSucceeded, hold: "captured"},
		{name: "verification_fails", corrupt: true, job: protocol.JobFailed, attempt: protocol.AttemptFailed,
			failureCode: string(protocol.FailVerificationFailed), hold: "released"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t)
			first := w.start(t, "first", "127.0.0.1:0", faultpoint.CommitBeforeTx2+"=kill")
			require.Contains(t, first.logs.String(), "FAULT POINTS ARMED")
			d := w.pair(t, first)
			jobID := w.createJob(t, first)

			c := dial(t, first, d, 1)
			o := deviceclient.Expect[protocol.LeaseOffer](t, c)
			require.Equal(t, jobID, o.JobID)
			deviceclient.MustSend(t, c, deviceclient.Progress(o, protocol.AttemptUploading))
			deviceclient.Expect[protocol.ProgressOK](t, c)
			content := mp4.Synthetic(mp4.SyntheticParams{Seed: o.AttemptID})
			w.upload(t, o, content)
			claimed := sha256.Sum256(content)
			if tc.corrupt {
				claimed = sha256.Sum256(append(content, 0))
			}
			out := protocol.Output{Key: o.Output.Key, Bytes: int64(len(content)), SHA256: hex.EncodeToString(claimed[:])}
			deviceclient.MustSend(t, c, deviceclient.Commit(o, out))

			// The kill point fired: the process died by SIGKILL, after
			// transaction 1 and before transaction 2, and never answered.
			first.requireKilledBySIGKILL(t)
			require.Contains(t, first.logs.String(), "faultpoint "+faultpoint.CommitBeforeTx2+": kill")
			expectClosed(t, c)
			w.requireState(t, jobID, o.AttemptID, protocol.JobVerifying, protocol.AttemptCommitting, "held", 0)

			restarted := w.start(t, "restarted", first.addr, "")
			require.NotContains(t, restarted.logs.String(), "FAULT POINTS ARMED")
			job := w.waitTerminal(t, restarted, jobID)
			require.Equal(t, tc.job, job.Status)
			require.Equal(t, tc.failureCode, job.FailureCode)
			require.Len(t, job.Attempts, 1)
			require.Equal(t, tc.attempt, job.Attempts[0].Status)
			require.Equal(t, tc.failureCode, job.Attempts[0].FailureCode)
			if tc.job == protocol.JobSucceeded {
				require.NotNil(t, job.Output)
				require.Equal(t, out.SHA256, job.Output.SHA256)
			}
			w.requireState(t, jobID, o.AttemptID, tc.job, tc.attempt, tc.hold, 1)
			w.requireFinishedOnceBySweeper(t, jobID, o.AttemptID, tc.job, tc.attempt)

			// The agent, reconnected, re-sends the commit it never got an
			// answer to: the attempt is decided, nothing changes.
			c2 := dial(t, restarted, d, 1)
			deviceclient.MustSend(t, c2, deviceclient.Commit(o, out))
			rej := deviceclient.Expect[protocol.CommitRejected](t, c2)
			require.Equal(t, protocol.CodeAttemptNotCommittable, rej.Code)
			w.requireState(t, jobID, o.AttemptID, tc.job, tc.attempt, tc.hold, 1)
			w.requireFinishedOnceBySweeper(t, jobID, o.AttemptID, tc.job, tc.attempt)
			w.requireBalance(t, tc.job == protocol.JobSucceeded)
			w.requireNoViolations(t)
		})
	}
}

// requireState checks the job's and attempt's rows, its one hold, and how
// many terminal webhook rows the outbox has for it.
func (w *world) requireState(t *testing.T, jobID, attemptID string, job protocol.JobStatus, attempt protocol.AttemptStatus,
	hold string, terminalWebhooks int) {
	t.Helper()
	ctx := context.Background()
	var gotJob, gotAttempt string
	require.NoError(t, w.pool.QueryRow(ctx, `SELECT j.status, a.status FROM jobs j JOIN job_attempts a ON a.job_id = j.id
		WHERE j.id = $1 AND a.id = $2`, jobID, attemptID).Scan(&gotJob, &gotAttempt))
	require.Equal(t, string(job), gotJob, "job %s", jobID)
	require.Equal(t, string(attempt), gotAttempt, "attempt %s", attemptID)
	var holds []string
	rows, err := w.pool.Query(ctx, `SELECT status FROM holds WHERE job_id = $1`, jobID)
	require.NoError(t, err)
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		holds = append(holds, s)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{hold}, holds, "holds of job %s", jobID)
	var events []string
	rows, err = w.pool.Query(ctx, `SELECT event FROM webhook_outbox WHERE job_id = $1
		AND event IN ('succeeded', 'cancelled', 'failed')`, jobID)
	require.NoError(t, err)
	for rows.Next() {
		var e string
		require.NoError(t, rows.Scan(&e))
		events = append(events, e)
	}
	require.NoError(t, rows.Err())
	require.Len(t, events, terminalWebhooks, "terminal webhooks of job %s: %v", jobID, events)
	if terminalWebhooks == 1 {
		require.Equal(t, string(job), events[0])
	}
}

// requireFinishedOnceBySweeper checks the journal: exactly one terminal
// transition of the job (verifying -> terminal) and of the attempt
// (committing -> terminal), both by the sweeper.
func (w *world) requireFinishedOnceBySweeper(t *testing.T, jobID, attemptID string, job protocol.JobStatus, attempt protocol.AttemptStatus) {
	t.Helper()
	type transition struct{ kind, from, to, actor string }
	rows, err := w.pool.Query(context.Background(), `SELECT kind, coalesce(from_status, ''), to_status, actor FROM job_events
		WHERE job_id = $1 AND to_status IN ('succeeded', 'failed', 'cancelled', 'lost') ORDER BY id`, jobID)
	require.NoError(t, err)
	var got []transition
	for rows.Next() {
		var tr transition
		require.NoError(t, rows.Scan(&tr.kind, &tr.from, &tr.to, &tr.actor))
		got = append(got, tr)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []transition{
		{"attempt", string(protocol.AttemptCommitting), string(attempt), string(protocol.ActorSweeper)},
		{"job", string(protocol.JobVerifying), string(job), string(protocol.ActorSweeper)},
	}, got, "terminal journal rows of job %s (attempt %s)", jobID, attemptID)
}

// requireBalance checks the buyer's money: the one job's price captured
// when it succeeded, all of it back otherwise.
func (w *world) requireBalance(t *testing.T, captured bool) {
	t.Helper()
	var balance, capturedCents int64
	require.NoError(t, w.pool.QueryRow(context.Background(), `SELECT balance_cents, captured_cents FROM buyers WHERE id = $1`,
		w.buyerID).Scan(&balance, &capturedCents))
	if captured {
		require.Equal(t, [2]int64{openingCents - price, price}, [2]int64{balance, capturedCents})
		return
	}
	require.Equal(t, [2]int64{openingCents, 0}, [2]int64{balance, capturedCents})
}
