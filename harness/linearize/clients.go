package linearize

import (
	"context"
	"sync"
	"time"

	"github.com/rendermac/rendermac/harness/fuzz"
	"github.com/rendermac/rendermac/harness/targets"
	"github.com/rendermac/rendermac/protocol"
)

// Perturbation labels (Input.Label).
const (
	linWrongEpoch    = "wrong_epoch"    // the attempt's own frame, epoch off by one or two
	linStaleToken    = "stale_token"    // the live attempt's ids with an earlier attempt's token
	linStaleAttempt  = "stale_attempt"  // an ended attempt's frame, with its own right token
	linForeignDevice = "foreign_device" // right ids and token from another device
	linCrossJob      = "cross_job"      // an attempt presented under another job's id
	linDuplicate     = "duplicate"      // a repeated frame (an old phase, a second commit)
	linRegression    = "regression"     // the agent reports a phase below its current one
	linWrongBuyer    = "wrong_buyer"    // cancel by a buyer who does not own the job
)

// linOffer is a lease offer as the board keeps it.
type linOffer struct {
	job, attempt, device, token string
	number, epoch               int
}

func (o linOffer) input(op Op) Input {
	in := Input{Op: op, Device: o.device, JobID: o.job, AttemptID: o.attempt, Epoch: o.epoch}
	switch op {
	case CommitBegin, Fail:
		in.Token = o.token
	}
	return in
}

// linWithOutput fills a commit's claimed output for the ids the input presents.
// The target stores the synthetic bytes for those ids, so verification
// passes exactly when ok; a bad claim has its sha256 altered.
func linWithOutput(in Input, ok bool) Input {
	in.Output, in.OutputOK = targets.SyntheticOutput(in.JobID, in.AttemptID), ok
	if !ok {
		last := byte('0')
		if in.Output.SHA256[len(in.Output.SHA256)-1] == '0' {
			last = '1'
		}
		in.Output.SHA256 = in.Output.SHA256[:len(in.Output.SHA256)-1] + string(last)
	}
	return in
}

func linRatio(num, den uint64) fuzz.Ratio { return fuzz.Ratio{Num: num, Den: den} }

// linClient is one concurrent client with its own PRNG, derived from the
// run's seed and the client's index.
type linClient struct {
	id  int
	run *linRun
	g   *fuzz.Rng
}

func (c *linClient) do(ctx context.Context, in Input) (protocol.Reply, error) {
	return c.run.rec.Do(ctx, c.id, in)
}

// pause sleeps lo..hi tenths of a millisecond: jitter that varies the
// interleavings, not synchronisation.
func (c *linClient) pause(lo, hi int) {
	time.Sleep(time.Duration(c.g.Between(lo, hi)) * 100 * time.Microsecond)
}

// agent is one session slot of a device: lease, work the attempt, repeat.
func (c *linClient) agent(ctx context.Context, dev string) error {
	for !c.run.over() {
		r, err := c.do(ctx, Input{Op: Lease, Device: dev})
		if err != nil {
			return err
		}
		if r.Code != protocol.CodeLeaseOffer {
			c.pause(5, 30)
			continue
		}
		o := linOffer{job: r.JobID, attempt: r.AttemptID, device: dev, token: r.CommitToken, number: r.AttemptNumber,
			epoch: r.LeaseEpoch}
		c.run.board.publish(o)
		if err := c.work(ctx, o); err != nil {
			return err
		}
	}
	return nil
}

var linPhases = []protocol.AttemptStatus{protocol.AttemptDownloading, protocol.AttemptRunning, protocol.AttemptUploading}

// work is an agent's attempt: the lease phases, then fail or commit, with
// the mistakes a confused or replaying agent makes on the way. It always
// ends the attempt (a sweep may end it first once the clock has moved).
func (c *linClient) work(ctx context.Context, o linOffer) error {
	for _, ph := range linPhases {
		if c.g.Chance(linRatio(1, 6)) {
			in := o.input(Progress)
			in.Phase, in.Epoch, in.Label = ph, o.epoch+1, linWrongEpoch
			if _, err := c.do(ctx, in); err != nil {
				return err
			}
		}
		in := o.input(Progress)
		in.Phase = ph
		r, err := c.do(ctx, in)
		if err != nil {
			return err
		}
		if r.Code != protocol.CodeProgressOK {
			code := protocol.FailInternalError
			if r.Reason == protocol.ReasonJobCancelling {
				code = protocol.FailBuyerCancelled
			}
			return c.fail(ctx, o, code)
		}
		if ph == protocol.AttemptRunning && c.g.Chance(linRatio(1, 5)) {
			in.Phase, in.Label = protocol.AttemptLeased, linRegression
			if _, err := c.do(ctx, in); err != nil {
				return err
			}
		}
		if ph != protocol.AttemptUploading && c.g.Chance(linRatio(1, 6)) {
			return c.fail(ctx, o, protocol.FailDownloadFailed)
		}
		c.pause(2, 20)
	}
	switch {
	case c.g.Chance(linRatio(1, 3)):
		return c.fail(ctx, o, protocol.FailUploadFailed)
	case c.g.Chance(linRatio(1, 25)):
		return c.fail(ctx, o, protocol.FailRunnerFailed)
	}
	return c.commit(ctx, o)
}

func (c *linClient) fail(ctx context.Context, o linOffer, code protocol.FailureCode) error {
	in := o.input(Fail)
	in.FailureCode = code
	r, err := c.do(ctx, in)
	if err == nil && r.Code == protocol.CodeFailOK && !r.Requeued {
		c.run.board.markTerminal(o.job)
	}
	return err
}

// commit sends the attempt's commit, preceded by the two mistakes the
// fences exist for, on every attempt that gets this far: the attempt's own
// commit with the epoch off by one, and with a stale token (an earlier
// attempt's, else another job's). The correct service refuses both; a
// service without the epoch or the token check accepts one of them, which
// is what makes the broken variants' histories refutable in every run. A
// quarter of the commits are repeated afterwards.
func (c *linClient) commit(ctx context.Context, o linOffer) error {
	wrongEpoch := linWithOutput(o.input(CommitBegin), true)
	wrongEpoch.Epoch, wrongEpoch.Label = o.epoch+1, linWrongEpoch
	if _, err := c.commitOnce(ctx, wrongEpoch); err != nil {
		return err
	}
	staleToken := linWithOutput(o.input(CommitBegin), true)
	staleToken.Token, staleToken.Label = c.run.board.staleToken(o, c.g), linStaleToken
	if _, err := c.commitOnce(ctx, staleToken); err != nil {
		return err
	}
	ok := !c.g.Chance(linRatio(1, 10))
	r, err := c.commitOnce(ctx, linWithOutput(o.input(CommitBegin), ok))
	if err != nil {
		return err
	}
	if c.g.Chance(linRatio(1, 4)) {
		in := linWithOutput(o.input(CommitBegin), ok)
		in.Label = linDuplicate
		if _, err := c.commitOnce(ctx, in); err != nil {
			return err
		}
	}
	if r.Code == protocol.CodeCommitConflict {
		// Only a broken service gets here; give the attempt up all the same.
		return c.fail(ctx, o, protocol.FailInternalError)
	}
	return nil
}

// commitOnce is transaction 1 and, when it answered commit_pending, the
// verification and transaction 2 that the same client runs next.
func (c *linClient) commitOnce(ctx context.Context, in Input) (protocol.Reply, error) {
	r, err := c.do(ctx, in)
	if err == nil && r.Code == protocol.CodeCommitPending {
		r, err = c.do(ctx, Input{Op: CommitFinish, Device: in.Device, JobID: in.JobID, AttemptID: in.AttemptID,
			Label: in.Label})
	}
	switch r.Code {
	case protocol.CodeCommitOK, protocol.CodeVerificationFailed, protocol.CodeJobCancelled:
		c.run.board.markTerminal(in.JobID)
	}
	return r, err
}

// adversary replays and forges frames from the offers it has seen. It
// sends at least AdversaryMinOps frames even after every job ended: stale
// frames after the end are part of the story too.
func (c *linClient) adversary(ctx context.Context) error {
	for n := 0; n < c.run.w.AdversaryOps && (n < c.run.w.AdversaryMinOps || !c.run.over()) && !c.run.aborted(); {
		in, ok := c.forge()
		if !ok {
			c.pause(5, 20)
			continue
		}
		n++
		r, err := c.do(ctx, in)
		if err != nil {
			return err
		}
		switch {
		case r.Code == protocol.CodeCommitPending:
			// A broken fence let a forged commit in: finish it like the
			// client it pretends to be.
			if _, err := c.commitOnce(ctx, Input{Op: CommitFinish, Device: in.Device, JobID: in.JobID,
				AttemptID: in.AttemptID, Label: in.Label}); err != nil {
				return err
			}
		case r.Code == protocol.CodeJobCancelled || (r.Code == protocol.CodeFailOK && !r.Requeued):
			c.run.board.markTerminal(in.JobID)
		}
		c.pause(0, 20)
	}
	return nil
}

var linForgeries = []string{linStaleAttempt, linForeignDevice, linWrongEpoch, linStaleToken, linCrossJob, linDuplicate}

// forge builds one perturbed frame against the newest attempt of a random
// job with offers. Commits are the most frequent frame, since they are
// what the fences protect.
func (c *linClient) forge() (Input, bool) {
	o, ok := c.run.board.latest(c.g)
	if !ok {
		return Input{}, false
	}
	op := []Op{Progress, CommitBegin, CommitBegin, Fail}[c.g.IntN(4)]
	kind := linForgeries[c.g.Weighted([]int{2, 2, 3, 3, 1, 1})]
	if kind == linStaleAttempt {
		if old, ok := c.run.board.older(o, c.g); ok {
			o = old
		} else {
			kind = linWrongEpoch
		}
	}
	switch {
	case kind == linDuplicate:
		op = Progress
	case kind == linStaleToken && op == Progress:
		op = CommitBegin // progress carries no token
	}
	in := o.input(op)
	in.Label = kind
	switch kind {
	case linForeignDevice:
		devs := c.run.world.Devices
		for in.Device == o.device {
			in.Device = devs[c.g.IntN(len(devs))].ID
		}
	case linWrongEpoch:
		in.Epoch = o.epoch + 1 + c.g.IntN(2)
	case linStaleToken:
		in.Token = c.run.board.staleToken(o, c.g)
	case linCrossJob:
		jobs := c.run.world.Jobs
		for in.JobID == o.job {
			in.JobID = jobs[c.g.IntN(len(jobs))].ID
		}
	}
	switch op {
	case Progress:
		in.Phase = protocol.AttemptUploading
		if kind == linDuplicate {
			in.Phase = protocol.AttemptLeased
		}
	case CommitBegin:
		in = linWithOutput(in, true)
	case Fail:
		in.FailureCode = protocol.FailInternalError
	}
	return in, true
}

// openingCancel cancels the first job as its buyer (RunWorkload calls it
// before the other clients start, so the job is still queued).
func (c *linClient) openingCancel(ctx context.Context) error {
	j := c.run.world.Jobs[0]
	return c.cancel(ctx, Input{Op: Cancel, Buyer: j.Request.BuyerID, JobID: j.ID})
}

// cancel sends in (a Cancel) and marks its job terminal when it was
// cancelled at once.
func (c *linClient) cancel(ctx context.Context, in Input) error {
	r, err := c.do(ctx, in)
	if err != nil {
		return err
	}
	if r.Code == protocol.CodeCancelled {
		c.run.board.markTerminal(in.JobID)
	}
	return nil
}

// canceller cancels the jobs with an index divisible by three, now and
// then, sometimes as the wrong buyer.
func (c *linClient) canceller(ctx context.Context) error {
	c.pause(0, 30)
	jobs := c.run.world.Jobs
	for n := 0; n < c.run.w.CancelOps && !c.run.over(); n++ {
		j := jobs[3*c.g.IntN((len(jobs)+2)/3)]
		in := Input{Op: Cancel, Buyer: j.Request.BuyerID, JobID: j.ID}
		if c.g.Chance(linRatio(1, 4)) {
			in.Buyer, in.Label = fuzz.WorldBuyers[1].ID, linWrongBuyer
		}
		if err := c.cancel(ctx, in); err != nil {
			return err
		}
		c.pause(50, 300)
	}
	return nil
}

// watcher is a buyer polling its jobs through the API's read, as a
// dashboard does: a read that shows a job's status from before a change
// another client already saw finish is what it is there to catch.
func (c *linClient) watcher(ctx context.Context) error {
	jobs := c.run.world.Jobs
	for n := 0; n < c.run.w.WatchOps && !c.run.over(); n++ {
		j := jobs[c.g.IntN(len(jobs))]
		if _, err := c.do(ctx, Input{Op: GetJob, Buyer: j.Request.BuyerID, JobID: j.ID}); err != nil {
			return err
		}
		c.pause(5, 40)
	}
	return nil
}

// linBoard is what the clients know of the run: every offer seen (the
// adversaries' material) and which jobs the replies said are terminal.
type linBoard struct {
	mu       sync.Mutex
	byJob    map[string][]linOffer // in attempt_number order
	order    []string              // jobs with offers, by first offer
	terminal map[string]bool
	jobs     int
}

func newLinBoard(jobs int) *linBoard {
	return &linBoard{byJob: map[string][]linOffer{}, terminal: map[string]bool{}, jobs: jobs}
}

func (b *linBoard) publish(o linOffer) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, seen := b.byJob[o.job]; !seen {
		b.order = append(b.order, o.job)
	}
	b.byJob[o.job] = append(b.byJob[o.job], o)
}

// latest is the newest offer of a random job.
func (b *linBoard) latest(g *fuzz.Rng) (linOffer, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.order) == 0 {
		return linOffer{}, false
	}
	offers := b.byJob[b.order[g.IntN(len(b.order))]]
	return offers[len(offers)-1], true
}

// older is a random earlier attempt of o's job.
func (b *linBoard) older(o linOffer, g *fuzz.Rng) (linOffer, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var prev []linOffer
	for _, x := range b.byJob[o.job] {
		if x.number < o.number {
			prev = append(prev, x)
		}
	}
	if len(prev) == 0 {
		return linOffer{}, false
	}
	return prev[g.IntN(len(prev))], true
}

// staleToken is a token that is not o's: an earlier attempt's of the same
// job if there is one, else another job's, else one nobody was offered.
func (b *linBoard) staleToken(o linOffer, g *fuzz.Rng) string {
	if old, ok := b.older(o, g); ok {
		return old.token
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, j := range b.order {
		if j != o.job {
			offers := b.byJob[j]
			return offers[g.IntN(len(offers))].token
		}
	}
	return "never-offered-token"
}

func (b *linBoard) markTerminal(job string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.terminal[job] = true
}

func (b *linBoard) allTerminal() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.terminal) >= b.jobs
}
