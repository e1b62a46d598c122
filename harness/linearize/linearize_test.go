package linearize

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/harness/fuzz"
	"github.com/rendermac/rendermac/harness/targets"
	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/fencing"
)

// testPG is the Postgres every test here shares; TestMain closes it.
var testPG *targets.Postgres

func TestMain(m *testing.M) {
	code := m.Run()
	if testPG != nil {
		_ = testPG.Close()
	}
	os.Exit(code)
}

// linSeed is the seed of every run here; each client derives its own PRNG
// from it. The interleavings are the scheduler's, so a seed fixes what the
// clients try, not the history.
const linSeed = 20260101

// linBundle is one run's target, world and history.
type linBundle struct {
	world   World
	history History
	clients int
	elapsed time.Duration
}

// linRunTest seeds the jobs on target, runs the clients and logs what they did.
func linRunTest(t *testing.T, target interface {
	Target
	linCreator
}, w Workload) linBundle {
	t.Helper()
	ctx := context.Background()
	world, err := SeedWorld(ctx, target, w)
	require.NoError(t, err)
	start := time.Now()
	h, err := RunWorkload(ctx, target, world, w)
	require.NoError(t, err)
	b := linBundle{world: world, history: h, clients: Clients(world, w), elapsed: time.Since(start)}
	t.Logf("seed %d: %d clients, %d operations in %v", w.Seed, b.clients, len(h.Ops), b.elapsed)
	return b
}

// linPostgresTarget returns a Postgres target over a fresh database, the
// service broken by mut ("" for the real one).
func linPostgresTarget(t *testing.T, mut fencing.Variant) *targets.PostgresTarget {
	t.Helper()
	ctx := context.Background()
	if testPG == nil {
		pg, err := targets.OpenPostgres(ctx, "", io.Discard)
		require.NoError(t, err, "the linearizability tests need Postgres")
		testPG = pg
	}
	w, err := targets.NewPostgresWorkers(ctx, 1, mut, testPG.NewDatabase)
	require.NoError(t, err)
	t.Cleanup(w.Close)
	target, err := NewPostgresTarget(ctx, w, linSeed)
	require.NoError(t, err)
	return target
}

// check runs the checker with its visualization going to the test's temp dir.
func (b linBundle) check(t *testing.T, name string) CheckResult {
	t.Helper()
	res := CheckDetail(b.history, CheckOptions{Timeout: 20 * time.Second,
		VisualizePath: filepath.Join(t.TempDir(), name+".html"), Log: linTestLog{t}})
	t.Logf("%s: %s over %d partitions (%d of %d operations checked) in %v", name, res.Result, res.Partitions, res.Checked, len(b.history.Ops), res.Elapsed)
	return res
}

type linTestLog struct{ t *testing.T }

func (l linTestLog) Write(p []byte) (int, error) { l.t.Log(string(p)); return len(p), nil }

// linCount counts the operations with that op, code and label.
func linCount(h History, op Op, code protocol.Code, label string) int {
	n := 0
	for _, o := range h.Ops {
		in, out := o.Input.(Input), o.Output.(Output)
		if in.Op == op && out.Code == code && in.Label == label {
			n++
		}
	}
	return n
}

// linRequireOK asserts the run was linearizable and reached the
// branches it exists for: offers, successes, requeues, and every fence
// refusing its perturbation.
func linRequireOK(t *testing.T, b linBundle, res CheckResult) {
	t.Helper()
	require.Equal(t, porcupine.Ok, res.Result, "not linearizable; see %s\n%s", res.VisualizePath,
		FormatCodes(Codes(b.history)))
	require.GreaterOrEqual(t, b.clients, 50)
	require.Equal(t, len(b.world.Jobs), res.Partitions, "every job's partition has operations")
	h := b.history
	for _, want := range []struct {
		op    Op
		code  protocol.Code
		label string
	}{
		{Lease, protocol.CodeLeaseOffer, ""},
		{Progress, protocol.CodeProgressOK, ""},
		{Progress, protocol.CodeLeaseConflict, linWrongEpoch},
		{CommitFinish, protocol.CodeCommitOK, ""},
		{CommitBegin, protocol.CodeCommitConflict, linWrongEpoch},
		{CommitBegin, protocol.CodeCommitConflict, linStaleToken},
		{CommitBegin, protocol.CodeCommitConflict, linForeignDevice},
		{Fail, protocol.CodeFailOK, ""},
	} {
		require.Positive(t, linCount(h, want.op, want.code, want.label), "no %s %s [%s] in\n%s", want.op, want.code,
			want.label, FormatCodes(Codes(h)))
	}
	require.Positive(t, linCount(h, Fail, protocol.CodeFailConflict, linStaleAttempt)+
		linCount(h, CommitBegin, protocol.CodeAttemptNotCommittable, linStaleAttempt), "no stale attempt refused")
	require.Positive(t, linCount(h, Cancel, protocol.CodeCancelling, "")+linCount(h, Cancel, protocol.CodeCancelled, ""),
		"no cancel took effect")
}

// linRequireCaught asserts the checker refuted the history, wrote the
// visualization, and that the history holds the smoking gun: a perturbed
// commit the broken fence let through.
func linRequireCaught(t *testing.T, b linBundle, res CheckResult, gun string) {
	t.Helper()
	require.Positive(t, linCount(b.history, CommitBegin, protocol.CodeCommitPending, gun),
		"the broken fence never accepted a %s commit:\n%s", gun, FormatCodes(Codes(b.history)))
	require.Equal(t, porcupine.Illegal, res.Result)
	require.NotEmpty(t, res.VisualizePath)
	st, err := os.Stat(res.VisualizePath)
	require.NoError(t, err)
	require.Positive(t, st.Size())
}

// TestLinearizabilityOfLockedModel runs the whole workload against the
// model behind one mutex, which is linearizable by construction: the
// per-job partitioning and projection must raise no false alarm.
func TestLinearizabilityOfLockedModel(t *testing.T) {
	w := Workload{Seed: linSeed}
	b := linRunTest(t, NewLockedModel(linSeed, ""), w)
	linRequireOK(t, b, b.check(t, "locked-model"))
}

// TestLinearizabilityCatchesBrokenModel: the same, with the model's own
// no_epoch_check variant, must be refuted.
func TestLinearizabilityCatchesBrokenModel(t *testing.T) {
	w := Workload{Seed: linSeed, Duration: 3 * time.Second}
	b := linRunTest(t, NewLockedModel(linSeed, "no_epoch_check"), w)
	linRequireCaught(t, b, b.check(t, "locked-model-no-epoch-check"), linWrongEpoch)
}

// TestLinearizabilityPostgres: at least fifty concurrent clients on ten jobs
// of the real service layer produce a history that is linearizable, job by
// job, against the model.
func TestLinearizabilityPostgres(t *testing.T) {
	w := Workload{Seed: linSeed}
	b := linRunTest(t, linPostgresTarget(t, fencing.VariantNone), w)
	codes := Codes(b.history)
	t.Logf("operations by outcome:\n%s", FormatCodes(codes))
	require.Positive(t, codes["tick tick"], "the clock never moved")
	require.Positive(t, codes["sweep swept"], "no sweep ran")
	linRequireOK(t, b, b.check(t, "postgres"))
}

// linOneLease seeds one job on the locked model and leases it on the first
// device.
func linOneLease(t *testing.T) (*LockedModel, World, protocol.Reply, linOffer) {
	ctx := context.Background()
	m := NewLockedModel(linSeed, "")
	world, err := SeedWorld(ctx, m, Workload{Jobs: 1})
	require.NoError(t, err)
	dev := world.Devices[0].ID
	offer, err := m.Lease(ctx, world.Now, dev)
	require.NoError(t, err)
	require.Equal(t, protocol.CodeLeaseOffer, offer.Code)
	return m, world, offer, linOffer{job: offer.JobID, attempt: offer.AttemptID, device: dev, token: offer.CommitToken,
		number: 1, epoch: 1}
}

// TestLinearizabilityRespectsRealTime: a progress refused as job_cancelling
// is linearizable when it overlaps the cancel (the cancel can be ordered
// first) and refuted when it returned before the cancel was called.
func TestLinearizabilityRespectsRealTime(t *testing.T) {
	_, world, offer, o := linOneLease(t)
	dev, job := o.device, world.Jobs[0]
	progress := o.input(Progress)
	progress.Phase = protocol.AttemptDownloading
	op := func(client int, in Input, out protocol.Reply, call, ret int64) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Input: in, Output: linOutputOf(out), Call: call, Return: ret}
	}
	history := func(progressCall, progressRet int64) History {
		return History{World: world, Ops: []porcupine.Operation{
			op(0, Input{Op: Lease, Device: dev}, offer, 0, 1),
			op(1, Input{Op: Cancel, Buyer: job.Request.BuyerID, JobID: job.ID},
				protocol.Reply{Code: protocol.CodeCancelling}, 10, 20),
			op(0, progress, protocol.Reply{Code: protocol.CodeLeaseConflict, Reason: protocol.ReasonJobCancelling},
				progressCall, progressRet),
		}}
	}
	opts := CheckOptions{VisualizePath: filepath.Join(t.TempDir(), "realtime.html"), Log: linTestLog{t}}
	ok, _ := Check(history(15, 25), opts)
	require.True(t, ok, "an overlapping progress may follow the cancel")
	ok, _ = Check(history(2, 5), opts)
	require.False(t, ok, "a progress that returned before the cancel began cannot see it")
}

// TestLinearizabilityChecksTime: a lease that outlived its TTL must be
// lost by the sweep after the tick that expired it, and nothing may act at
// an instant the clock has left. A history whose sweep did nothing, or
// whose progress after the tick was accepted, is refuted; the honest one
// passes.
func TestLinearizabilityChecksTime(t *testing.T) {
	m, world, offer, o := linOneLease(t)
	dev, job := o.device, world.Jobs[0]
	later := (fuzz.WorldLeaseTTL + 5*time.Second).Microseconds()
	eff, err := m.SweepEffects(context.Background(), world.Now.Add(time.Duration(later)*time.Microsecond))
	require.NoError(t, err)
	honest := linEncodeSweep(eff)
	require.Contains(t, honest, ">lost lease_expired", "the model's sweep must lose the expired attempt")
	op := func(in Input, out Output, call int64) porcupine.Operation {
		return porcupine.Operation{Input: in, Output: out, Call: call, Return: call + 1}
	}
	history := func(sweep string, tail ...porcupine.Operation) History {
		return History{World: world, Ops: append([]porcupine.Operation{
			op(Input{Op: Lease, Device: dev}, linOutputOf(offer), 0),
			op(Input{Op: Tick, Now: later}, Output{Code: "tick"}, 10),
			op(Input{Op: Sweep, Now: later}, Output{Code: "swept", Sweep: sweep}, 20),
		}, tail...)}
	}
	progress := o.input(Progress)
	progress.Phase, progress.Now = protocol.AttemptRunning, later
	conflict := linOutputOf(protocol.Reply{Code: protocol.CodeLeaseConflict, Reason: protocol.ReasonAttemptTerminal})
	accepted := linOutputOf(protocol.Reply{Code: protocol.CodeProgressOK})
	stale := progress
	stale.Now = 0
	opts := CheckOptions{VisualizePath: filepath.Join(t.TempDir(), "time.html"), Log: linTestLog{t}}
	for _, tc := range []struct {
		name string
		h    History
		ok   bool
	}{
		{"honest sweep, progress refused after it", history(honest, op(progress, conflict, 30)), true},
		{"sweep that did not expire the lease", history(""), false},
		{"progress accepted on the lost attempt", history(honest, op(progress, accepted, 30)), false},
		{"operation at an instant the clock has left", history(honest, op(stale, conflict, 30)), false},
	} {
		ok, _ := Check(tc.h, opts)
		require.Equal(t, tc.ok, ok, "%s (job %s)", tc.name, job.ID)
	}
}
