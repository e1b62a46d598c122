package fencing_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/internal/mp4"
	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/fencing"
)

// Many devices lease at once: SKIP LOCKED hands each job to one attempt,
// slots are never overbooked, and then commits race cancels on every job
// without a deadlock surfacing or an invariant breaking.
func TestConcurrentLeaseCommitCancel(t *testing.T) {
	t.Parallel()
	b := setup(t, fencing.Config{})
	ctx := context.Background()
	const devices, slots, jobs = 4, 3, 20
	var ids []string
	for i := range devices {
		id := fmt.Sprintf("00000000-0000-4000-8000-0000000001%02d", i)
		require.NoError(t, b.svc.CreateDevice(ctx, id, "mac", []string{"synthetic.mp4"}, slots, ""))
		ids = append(ids, id)
	}
	for i := range jobs {
		b.createJob(t, t0.Add(time.Duration(i)*time.Microsecond), nil)
	}
	offers := make(chan [2]any, devices*slots*2)
	var wg sync.WaitGroup
	for _, dev := range ids {
		for range 2 * slots { // more callers than slots
			wg.Go(func() {
				r, err := b.svc.Lease(ctx, t0, dev)
				require.NoError(t, err)
				if r.Code == protocol.CodeLeaseOffer {
					offers <- [2]any{dev, r}
				} else {
					require.Equal(t, protocol.CodeNoSlot, r.Code)
				}
			})
		}
	}
	wg.Wait()
	close(offers)
	seen := map[string]bool{}
	var got [][2]any
	for o := range offers {
		r := o[1].(protocol.Reply)
		require.False(t, seen[r.JobID], "job %s leased twice", r.JobID)
		seen[r.JobID] = true
		got = append(got, o)
	}
	require.Len(t, got, devices*slots)
	b.requireInvariants(t)

	for _, o := range got {
		dev, offer := o[0].(string), o[1].(protocol.Reply)
		wg.Go(func() { b.raceCommit(t, dev, offer) })
		wg.Go(func() {
			r, err := b.svc.Cancel(ctx, t0, buyerID, offer.JobID)
			require.NoError(t, err)
			require.Contains(t, []protocol.Code{protocol.CodeCancelling, protocol.CodeJobTerminal}, r.Code)
		})
	}
	wg.Wait()
	b.requireInvariants(t)
	_, err := b.svc.Sweep(ctx, t0.Add(24*time.Hour))
	require.NoError(t, err)
	for _, j := range b.snapshot(t).Jobs {
		require.True(t, j.Status.Terminal(), "job %s is %s after the final sweep", j.ID, j.Status)
	}
	t.Logf("retries: %v", b.svc.Stats().Retries)
}

// raceCommit drives one attempt to a commit while a cancel may land at any point.
func (b *bundle) raceCommit(t *testing.T, dev string, offer protocol.Reply) {
	ctx := context.Background()
	r, err := b.svc.Progress(ctx, t0, dev, protocol.Progress{JobID: offer.JobID, AttemptID: offer.AttemptID,
		LeaseEpoch: 1, Phase: protocol.AttemptUploading})
	require.NoError(t, err)
	if r.Code != protocol.CodeProgressOK {
		require.Equal(t, protocol.ReasonJobCancelling, r.Reason)
		return
	}
	out := b.put(t, offer, mp4.Synthetic(mp4.SyntheticParams{Seed: offer.AttemptID}))
	r, err = b.svc.Commit(ctx, t0, dev, commitOf(offer, out))
	require.NoError(t, err)
	require.Contains(t, []protocol.Code{protocol.CodeCommitOK, protocol.CodeJobCancelled}, r.Code)
	want := protocol.JobCancelled
	if r.Code == protocol.CodeCommitOK {
		want = protocol.JobSucceeded
	}
	require.Equal(t, want, b.job(t, offer.JobID).Status)
}

// injectFaults makes the first n statements of kind event ("INSERT" or
// "UPDATE") on job_attempts fail with SQLSTATE code. A sequence counts the
// firings because sequences ignore rollback: the failed transaction cannot
// undo the count, so its re-run gets through.
func injectFaults(t *testing.T, b *bundle, event, code string, n int) {
	t.Helper()
	name := "inject_" + strings.ToLower(event)
	for _, q := range []string{
		`CREATE SEQUENCE ` + name,
		`CREATE FUNCTION ` + name + `() RETURNS trigger LANGUAGE plpgsql AS $$
		 BEGIN
		     IF nextval('` + name + `') <= ` + fmt.Sprint(n) + ` THEN
		         RAISE EXCEPTION 'injected fault' USING ERRCODE = '` + code + `';
		     END IF;
		     RETURN NEW;
		 END $$`,
		`CREATE TRIGGER ` + name + ` BEFORE ` + event + ` ON job_attempts FOR EACH ROW EXECUTE FUNCTION ` + name + `()`,
	} {
		_, err := b.pool.Exec(context.Background(), q)
		require.NoError(t, err)
	}
}

// A serialization failure and a deadlock re-run the whole transaction, are
// counted per operation, and the re-run inserts the ids the first run drew:
// the offer carries the source's first attempt id and token, as the model's
// would.
func TestTransactionsAreRetriedAndCounted(t *testing.T) {
	t.Parallel()
	b := setup(t, fencing.Config{})
	b.createJob(t, t0, nil)
	injectFaults(t, b, "INSERT", "40001", 1)
	offer := b.lease(t, t0, deviceID)
	fresh := protocol.RandomIDs{Attempts: rand.NewChaCha8([32]byte{2}), Tokens: rand.NewChaCha8([32]byte{3})}
	require.Equal(t, fresh.NewAttemptID(), offer.AttemptID)
	token, _, err := fresh.NewCommitToken()
	require.NoError(t, err)
	require.Equal(t, token, offer.CommitToken)

	injectFaults(t, b, "UPDATE", "40P01", 1)
	require.Equal(t, protocol.CodeProgressOK, b.progress(t, t0, deviceID, offer, protocol.AttemptRunning).Code)
	require.Equal(t, map[string]int64{fencing.OpLease: 1, fencing.OpProgress: 1}, b.svc.Stats().Retries)
	require.Equal(t, protocol.AttemptRunning, b.attempt(t, offer.AttemptID).Status)
}

// Retries are bounded: past MaxTxRetries the failure is returned.
func TestRetriesAreBounded(t *testing.T) {
	t.Parallel()
	b := setup(t, fencing.Config{MaxTxRetries: 2})
	b.createJob(t, t0, nil)
	injectFaults(t, b, "INSERT", "40001", 1000)
	_, err := b.svc.Lease(context.Background(), t0, deviceID)
	var pe *pgconn.PgError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, "40001", pe.Code)
	require.Equal(t, int64(2), b.svc.Stats().Retries[fencing.OpLease])
	require.Equal(t, protocol.JobQueued, b.snapshot(t).Jobs[0].Status, "nothing was written")
}
