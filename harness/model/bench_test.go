package model

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/rendermac/rendermac/protocol"
)

// benchEpisodeSteps bounds one model's life in the benchmark, so the model
// stays the size of a harness run (about 20 open jobs, a few hundred in
// all) instead of growing with b.N.
const (
	benchEpisodeSteps = 1000
	benchOpenJobs     = 20
)

var benchDevices = []string{"bench-a", "bench-b", "bench-c", "bench-d"}

// benchDriver plays honest agents, a buyer and the clock against a model,
// with a few perturbed frames, choosing with a constant-seeded PRNG.
type benchDriver struct {
	r      *rand.Rand
	m      *ExecutionModel
	now    time.Time
	seed   uint64
	steps  int
	offers []protocol.Reply
	dev    map[string]string
}

func newBenchDriver() *benchDriver {
	d := &benchDriver{r: rand.New(rand.NewPCG(1, 2))}
	d.reset()
	return d
}

func (d *benchDriver) reset() {
	d.seed++
	d.m = New(Config{}, seededIDs(d.seed))
	d.m.AddBuyer(buyerRich, 1<<50)
	for _, id := range benchDevices {
		d.m.AddDevice(id, []string{svcSynthetic, svc720p}, 2)
	}
	d.now, d.steps, d.offers, d.dev = t0, 0, d.offers[:0], map[string]string{}
	for len(d.m.open) < benchOpenJobs {
		d.m.CreateJob(d.now, request(buyerRich, svcSynthetic))
	}
}

// pick returns a random offer whose attempt is still live, dropping the
// ones that are not.
func (d *benchDriver) pick() (protocol.Reply, bool) {
	for len(d.offers) > 0 {
		i := d.r.IntN(len(d.offers))
		o := d.offers[i]
		if a, ok := d.m.LiveAttempt(o.JobID); ok && a.ID == o.AttemptID {
			return o, true
		}
		d.offers[i] = d.offers[len(d.offers)-1]
		d.offers = d.offers[:len(d.offers)-1]
	}
	return protocol.Reply{}, false
}

// step performs exactly one model operation and returns its reply code
// ("" for a sweep).
func (d *benchDriver) step() protocol.Code {
	if d.steps == benchEpisodeSteps {
		d.reset()
	}
	d.steps++
	n := d.r.IntN(100)
	o, ok := d.pick()
	switch {
	case n < 20 || !ok:
		return d.lease()
	case n < 45:
		a, _ := d.m.LiveAttempt(o.JobID)
		phase := protocol.AttemptStatuses[min(protocol.PhaseRank(a.Status), 3)]
		return d.m.Progress(d.now, d.dev[o.AttemptID], progressOf(o, phase)).Code
	case n < 60:
		return d.m.Commit(d.now, d.dev[o.AttemptID], commitOf(o), d.r.IntN(10) > 0).Code
	case n < 64:
		return d.m.CommitBegin(d.now, d.dev[o.AttemptID], commitOf(o), true).Code
	case n < 68:
		c := commitOf(o) // a perturbed frame: wrong epoch
		c.LeaseEpoch++
		return d.m.Commit(d.now, d.dev[o.AttemptID], c, true).Code
	case n < 74:
		code := protocol.FailureCodes[d.r.IntN(len(protocol.FailureCodes))]
		return d.m.Fail(d.now, d.dev[o.AttemptID], failOf(o, code)).Code
	case n < 77:
		return d.m.Cancel(d.now, buyerRich, o.JobID).Code
	case n < 85:
		d.now = d.now.Add(time.Duration(1+d.r.IntN(8)) * time.Second)
		d.m.Sweep(d.now)
		return ""
	}
	if len(d.m.open) < benchOpenJobs {
		return d.m.CreateJob(d.now, request(buyerRich, svcSynthetic)).Code
	}
	d.m.Sweep(d.now) // a full model: the sweeper's idle pass instead
	return ""
}

func (d *benchDriver) lease() protocol.Code {
	dev := benchDevices[d.r.IntN(len(benchDevices))]
	r := d.m.Lease(d.now, dev)
	if r.Code == protocol.CodeLeaseOffer {
		d.offers = append(d.offers, r)
		d.dev[r.AttemptID] = dev
	}
	return r.Code
}

// BenchmarkModelStep measures model operations per second with
// CheckInvariants after every one, the harness's cost per step.
func BenchmarkModelStep(b *testing.B) {
	d := newBenchDriver()
	b.ReportAllocs()
	steps := 0
	for b.Loop() {
		d.step()
		if vs := d.m.CheckInvariants(); vs != nil {
			b.Fatalf("step %d: %v", steps, vs)
		}
		steps++
	}
	b.ReportMetric(float64(steps)/b.Elapsed().Seconds(), "steps/s")
}

// TestBenchDriverIsClean runs the benchmark's driver under the full checks
// and asserts the mix does real work, so the figure is for a model that
// stays correct while leasing, committing and failing.
func TestBenchDriverIsClean(t *testing.T) {
	t.Parallel()
	d := newBenchDriver()
	codes := map[protocol.Code]int{}
	for i := range 3 * benchEpisodeSteps {
		codes[d.step()]++
		if vs := d.m.CheckInvariants(); vs != nil {
			t.Fatalf("step %d: %v", i, vs)
		}
		if i%97 == 0 {
			if v := snapshotViolations(d.m.Snapshot(), d.m.credits()); len(v) > 0 {
				t.Fatalf("step %d: %v", i, v)
			}
		}
	}
	for _, c := range []protocol.Code{protocol.CodeLeaseOffer, protocol.CodeProgressOK, protocol.CodeCommitOK,
		protocol.CodeVerificationFailed, protocol.CodeCommitPending, protocol.CodeCommitConflict, protocol.CodeFailOK,
		protocol.CodeCancelling, protocol.CodeCreated} {
		if codes[c] == 0 {
			t.Errorf("the benchmark mix never got %s: %v", c, codes)
		}
	}
	t.Logf("benchmark mix: %v", codes)
}
