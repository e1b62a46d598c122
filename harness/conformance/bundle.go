package conformance

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/harness/fuzz"
	"github.com/rendermac/rendermac/protocol"
)

// bundle is one case's target with its clock. Every operation runs at now,
// which only moves forward (the full stack's pinned clock cannot go back),
// and every helper that changes rows checks the invariants after it.
type bundle struct {
	t    *testing.T
	ctx  context.Context
	tg   fuzz.Target
	opts Options
	now  time.Time
}

func newBundle(t *testing.T, tg fuzz.Target, opts Options) *bundle {
	t.Helper()
	b := &bundle{t: t, ctx: context.Background(), tg: tg, opts: opts, now: fuzz.Epoch}
	// Every case ends with SPEC section 4 checked over what it left.
	t.Cleanup(func() {
		b.clean()
		require.NoError(t, tg.Close())
	})
	return b
}

// tick moves the clock forward by d.
func (b *bundle) tick(d time.Duration) {
	require.GreaterOrEqual(b.t, d, time.Duration(0), "the clock only moves forward")
	b.now = b.now.Add(d)
}

// clean asserts that no invariant is broken.
func (b *bundle) clean() {
	b.t.Helper()
	v, err := b.tg.CheckInvariants(b.ctx)
	requireNoError(b.t, err)
	require.Empty(b.t, v, "invariant violations")
}

func (b *bundle) createReply(req protocol.CreateJobRequest) protocol.Reply {
	b.t.Helper()
	r, err := b.tg.CreateJob(b.ctx, b.now, req)
	requireNoError(b.t, err)
	return normal(r)
}

// create creates a job and returns its id.
func (b *bundle) create(req protocol.CreateJobRequest) string {
	b.t.Helper()
	r := b.createReply(req)
	require.Equal(b.t, protocol.CodeCreated, r.Code, "%+v", r)
	b.clean()
	return r.JobID
}

func (b *bundle) leaseReply(dev string) protocol.Reply {
	b.t.Helper()
	r, err := b.tg.Lease(b.ctx, b.now, dev)
	requireNoError(b.t, err)
	return normal(r)
}

// lease leases on dev and requires an offer.
func (b *bundle) lease(dev string) protocol.Reply {
	b.t.Helper()
	r := b.leaseReply(dev)
	require.Equal(b.t, protocol.CodeLeaseOffer, r.Code, "%+v", r)
	b.clean()
	return r
}

func (b *bundle) progress(dev string, p protocol.Progress) protocol.Reply {
	b.t.Helper()
	r, err := b.tg.Progress(b.ctx, b.now, dev, p)
	requireNoError(b.t, err)
	return normal(r)
}

// phase reports phase for an offer and requires progress_ok.
func (b *bundle) phase(dev string, o protocol.Reply, phase protocol.AttemptStatus) {
	b.t.Helper()
	r := b.progress(dev, progressOf(o, phase))
	require.Equal(b.t, protocol.CodeProgressOK, r.Code, "%+v", r)
	b.clean()
}

// uploading creates a job, leases it on dev and moves it to uploading, a
// second apart.
func (b *bundle) uploading(dev string) protocol.Reply {
	b.t.Helper()
	b.create(request(buyerRich, svcSynthetic))
	o := b.lease(dev)
	b.tick(time.Second)
	b.phase(dev, o, protocol.AttemptUploading)
	b.tick(time.Second)
	return o
}

// commitOf is the commit an honest agent sends for an offer.
func (b *bundle) commitOf(o protocol.Reply) protocol.Commit {
	return protocol.Commit{Type: protocol.TypeCommit, JobID: o.JobID, AttemptID: o.AttemptID, LeaseEpoch: o.LeaseEpoch,
		CommitToken: o.CommitToken, Output: b.opts.Outputs(o.JobID, o.AttemptID)}
}

// outputOK says whether the stored bytes match c's claim: the claimed key
// is not part of it, verification checks that on its own.
func (b *bundle) outputOK(c protocol.Commit) bool {
	honest := b.opts.Outputs(c.JobID, c.AttemptID)
	return c.Output.SHA256 == honest.SHA256 && c.Output.Bytes == honest.Bytes
}

// commitBegin runs transaction 1 alone.
func (b *bundle) commitBegin(dev string, c protocol.Commit) protocol.Reply {
	b.t.Helper()
	r, err := b.tg.CommitBegin(b.ctx, b.now, dev, c, b.outputOK(c))
	requireNoError(b.t, err)
	return normal(r)
}

// commitFinish runs verification and transaction 2.
func (b *bundle) commitFinish(job, att string) protocol.Reply {
	b.t.Helper()
	r, err := b.tg.CommitFinish(b.ctx, b.now, job, att)
	requireNoError(b.t, err)
	return normal(r)
}

// commit runs a whole commit in one step and returns its final reply:
// transaction 1's refusal, or transaction 2's answer after commit_pending.
func (b *bundle) commit(dev string, c protocol.Commit) protocol.Reply {
	b.t.Helper()
	if w, ok := b.tg.(WholeCommitter); ok {
		begin, final, err := w.Commit(b.ctx, b.now, dev, c, b.outputOK(c))
		requireNoError(b.t, err)
		if begin.Code != protocol.CodeCommitPending {
			return normal(begin)
		}
		return normal(final)
	}
	r := b.commitBegin(dev, c)
	if r.Code != protocol.CodeCommitPending {
		return r
	}
	return b.commitFinish(c.JobID, c.AttemptID)
}

func (b *bundle) fail(dev string, f protocol.Fail) protocol.Reply {
	b.t.Helper()
	r, err := b.tg.Fail(b.ctx, b.now, dev, f)
	requireNoError(b.t, err)
	return normal(r)
}

func (b *bundle) cancel(buyer, job string) protocol.Reply {
	b.t.Helper()
	r, err := b.tg.Cancel(b.ctx, b.now, buyer, job)
	requireNoError(b.t, err)
	return normal(r)
}

// sweep runs a sweep and checks the invariants after it.
func (b *bundle) sweep() protocol.SweepResult {
	b.t.Helper()
	r, err := b.tg.Sweep(b.ctx, b.now)
	requireNoError(b.t, err)
	b.clean()
	return r
}

func (b *bundle) revoke(dev string) {
	b.t.Helper()
	requireNoError(b.t, b.tg.(Revoker).RevokeDevice(b.ctx, dev))
}

func (b *bundle) snapshot() protocol.Snapshot {
	b.t.Helper()
	s, err := b.tg.Snapshot(b.ctx)
	requireNoError(b.t, err)
	return s
}

// unchanged asserts that f mutates nothing: the rows are the same after.
func (b *bundle) unchanged(f func()) {
	b.t.Helper()
	before := b.snapshot()
	f()
	require.Empty(b.t, fuzz.DiffSnapshots(before, b.snapshot()))
	b.clean()
}

// find returns the row of rows whose id is id, failing the test without one.
func find[T any](t *testing.T, what string, rows []T, id string, idOf func(T) string) T {
	t.Helper()
	for _, r := range rows {
		if idOf(r) == id {
			return r
		}
	}
	t.Fatalf("no %s %s", what, id)
	var zero T
	return zero
}

func (b *bundle) job(id string) protocol.JobRow {
	b.t.Helper()
	return find(b.t, "job", b.snapshot().Jobs, id, func(r protocol.JobRow) string { return r.ID })
}

func (b *bundle) attempt(id string) protocol.AttemptRow {
	b.t.Helper()
	return find(b.t, "attempt", b.snapshot().Attempts, id, func(r protocol.AttemptRow) string { return r.ID })
}

func (b *bundle) buyer(id string) protocol.BuyerRow {
	b.t.Helper()
	return find(b.t, "buyer", b.snapshot().Buyers, id, func(r protocol.BuyerRow) string { return r.ID })
}

func (b *bundle) device(id string) protocol.DeviceRow {
	b.t.Helper()
	return find(b.t, "device", b.snapshot().Devices, id, func(r protocol.DeviceRow) string { return r.ID })
}

// line renders a journal row as "kind from->to code actor".
func line(e protocol.EventRow) string {
	return e.Kind + " " + e.From + "->" + e.To + " " + e.Code + " " + string(e.Actor)
}

// journalOf returns the journal rows of one job, in order.
func (b *bundle) journalOf(job string) []string {
	b.t.Helper()
	var out []string
	for _, e := range b.snapshot().Journal {
		if e.JobID == job {
			out = append(out, line(e))
		}
	}
	return out
}

func (b *bundle) journalLen() int { return len(b.snapshot().Journal) }

// journalSince returns the journal rows appended after the first n.
func (b *bundle) journalSince(n int) []protocol.EventRow { return b.snapshot().Journal[n:] }

func lines(rows []protocol.EventRow) []string {
	out := make([]string, len(rows))
	for i, e := range rows {
		out[i] = line(e)
	}
	return out
}
