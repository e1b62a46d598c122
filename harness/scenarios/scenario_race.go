package scenarios

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rendermac/rendermac/harness/targets"
	"github.com/rendermac/rendermac/internal/mp4"
	"github.com/rendermac/rendermac/protocol"
)

// The cancel-versus-commit race, on the service layer directly (no
// WebSocket between, so a thousand rounds take seconds): every round
// uploads an attempt, then runs the whole commit (transaction 1,
// verification, transaction 2) against a buyer's cancel delayed by a random
// fraction of the previous commit's duration, so cancels land before
// transaction 1, during verification and after transaction 2. Each round
// must end succeeded XOR cancelled, with the reply pairing the semantics
// allow, and no job may ever go cancelling -> succeeded.

// raceOutcome classifies a round.
type raceOutcome int

const (
	raceSucceeded raceOutcome = iota
	raceCancelledBeforeCommit
	raceCancelledDuringVerification
)

var raceCounters = [...]string{"race.succeeded", "race.cancelled_before_commit", "race.cancelled_during_verification"}

// cmdRace runs the race.
// Example: race cancel-commit rounds=1000 lanes=4
func cmdRace(r *scRun, st scStep) error {
	if arg(st, 0) != "cancel-commit" {
		return fmt.Errorf("want: race cancel-commit [rounds=N] [lanes=N]")
	}
	rounds, err := optInt(st, "rounds", 1000)
	if err != nil {
		return err
	}
	lanes, err := optInt(st, "lanes", 4)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(r.ctx)
	defer cancel()
	start := time.Now()
	var next atomic.Int64
	var counts [len(raceCounters)]atomic.Int64
	errs := make([]error, lanes)
	var wg sync.WaitGroup
	for lane := range lanes {
		dev := fmt.Sprintf("00000000-0000-4000-8000-00000000e%03x", lane)
		if err := r.admin.CreateDevice(ctx, dev, "race-"+strconv.Itoa(lane), []string{scService}, 1, ""); err != nil {
			return err
		}
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(lane)+1, 0x72616365))
			last := 2 * time.Millisecond
			for i := next.Add(1); i <= int64(rounds) && ctx.Err() == nil; i = next.Add(1) {
				out, took, err := r.raceRound(ctx, dev, rng, last, i)
				if err != nil {
					errs[lane] = fmt.Errorf("round %d: %w", i, err)
					cancel()
					return
				}
				last = (last + took) / 2
				counts[out].Add(1)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	var bad int
	if err := r.observer.QueryRow(r.ctx, `
SELECT count(*) FROM job_events WHERE kind = 'job' AND from_status = 'cancelling' AND to_status = 'succeeded'`).Scan(&bad); err != nil {
		return err
	}
	if bad > 0 {
		return fmt.Errorf("%d journal rows take a job cancelling -> succeeded", bad)
	}
	// The journal lane shows the summary, not thousands of rows.
	if err := r.observer.QueryRow(r.ctx, `SELECT coalesce(max(id), 0) FROM job_events`).Scan(&r.journalSeq); err != nil {
		return err
	}
	r.count("race.rounds", int64(rounds))
	for i, name := range raceCounters {
		r.count(name, counts[i].Load())
	}
	summary := fmt.Sprintf("race: %d rounds on %d lanes in %s: %d succeeded, %d cancelled before commit, %d cancelled during verification; none cancelling -> succeeded",
		rounds, lanes, time.Since(start).Round(time.Millisecond), counts[0].Load(), counts[1].Load(), counts[2].Load())
	r.tl.add(laneDatabase, summary)
	r.reply(fmt.Sprintf("%d succeeded XOR cancelled (%d during verification)", rounds, counts[2].Load()))
	return nil
}

// raceRound sets one attempt up to the point of commit on dev and races
// the commit against a cancel. It returns the outcome and how long the
// commit took (the next round's jitter scale).
func (r *scRun) raceRound(ctx context.Context, dev string, rng *rand.Rand, scale time.Duration, round int64) (raceOutcome, time.Duration, error) {
	svc, now := r.admin, r.clock.Now()
	cr, err := svc.CreateJob(ctx, now, protocol.CreateJobRequest{BuyerID: scBuyerID, Service: scService,
		Params: map[string]string{"seed": "round-" + strconv.FormatInt(round, 10)}, MaxAttempts: 1, AdmissionWindow: time.Hour,
		Input: protocol.InputRef{Bytes: 1, SHA256: "0000000000000000000000000000000000000000000000000000000000000000"}})
	if err != nil || cr.Code != protocol.CodeCreated {
		return 0, 0, fmt.Errorf("create: %v %+v", err, cr)
	}
	// Another lane may have leased this lane's job; either way this lane
	// goes on with the attempt it was offered. no_job is possible for a
	// moment: the lease's snapshot may predate the job another lane just
	// created while the job it does see is locked (SKIP LOCKED).
	var o protocol.Reply
	for try := 0; ; try++ {
		o, err = svc.Lease(ctx, now, dev)
		if err == nil && o.Code == protocol.CodeNoJob && try < 50 {
			time.Sleep(time.Millisecond)
			continue
		}
		if err != nil || o.Code != protocol.CodeLeaseOffer {
			return 0, 0, fmt.Errorf("lease: %v %+v", err, o)
		}
		break
	}
	p, err := svc.Progress(ctx, now, dev, protocol.Progress{JobID: o.JobID, AttemptID: o.AttemptID,
		LeaseEpoch: o.LeaseEpoch, Phase: protocol.AttemptUploading})
	if err != nil || p.Code != protocol.CodeProgressOK {
		return 0, 0, fmt.Errorf("progress: %v %+v", err, p)
	}
	out := targets.SyntheticOutput(o.JobID, o.AttemptID)
	data := mp4.Synthetic(mp4.SyntheticParams{Seed: o.AttemptID, MdatBytes: 2048})
	if obj, err := r.store.Put(ctx, out.Key, bytes.NewReader(data)); err != nil || obj.SHA256 != out.SHA256 {
		return 0, 0, fmt.Errorf("upload: %v", err)
	}
	commit := protocol.Commit{JobID: o.JobID, AttemptID: o.AttemptID, LeaseEpoch: o.LeaseEpoch,
		CommitToken: o.CommitToken, Output: out}
	delay := time.Duration(rng.Int64N(int64(scale)*3/2 + 1))
	var commitReply, cancelReply protocol.Reply
	var commitErr, cancelErr error
	var took time.Duration
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.Now()
		commitReply, commitErr = svc.Commit(ctx, now, dev, commit)
		took = time.Since(t)
	})
	wg.Go(func() {
		time.Sleep(delay)
		cancelReply, cancelErr = svc.Cancel(ctx, now, scBuyerID, o.JobID)
	})
	wg.Wait()
	if err := errors.Join(commitErr, cancelErr); err != nil {
		return 0, took, fmt.Errorf("commit %q, cancel %q: %w", commitReply.Code, cancelReply.Code, err)
	}
	return r.raceVerdict(ctx, o.JobID, commitReply.Code, cancelReply.Code, took)
}

// raceVerdict checks the reply pairing against the job's row and journal.
func (r *scRun) raceVerdict(ctx context.Context, jobID string, commit, cancel protocol.Code, took time.Duration) (raceOutcome, time.Duration, error) {
	var status protocol.JobStatus
	var duringVerify bool
	err := r.observer.QueryRow(ctx, `
SELECT j.status, EXISTS (SELECT 1 FROM job_events e WHERE e.job_id = j.id AND e.kind = 'job'
                         AND e.from_status = 'verifying' AND e.to_status = 'cancelling')
FROM jobs j WHERE j.id = $1`, jobID).Scan(&status, &duringVerify)
	if err != nil {
		return 0, took, err
	}
	switch {
	case commit == protocol.CodeCommitOK && cancel == protocol.CodeJobTerminal && status == protocol.JobSucceeded:
		return raceSucceeded, took, nil
	case commit == protocol.CodeJobCancelled && cancel == protocol.CodeCancelling && status == protocol.JobCancelled:
		if duringVerify {
			return raceCancelledDuringVerification, took, nil
		}
		return raceCancelledBeforeCommit, took, nil
	}
	return 0, took, fmt.Errorf("commit %s and cancel %s left the job %s: not succeeded XOR cancelled", commit, cancel, status)
}
