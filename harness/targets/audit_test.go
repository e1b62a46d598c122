package targets

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/harness/fuzz"
	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/fencing"
)

func jobIDs(s protocol.Snapshot) []string {
	var out []string
	for _, j := range s.Jobs {
		out = append(out, j.ID)
	}
	return out
}

// TestScopedAuditSeesEveryWrite holds the scoped projection to its
// promise: the jobs named, plus every job any transaction wrote since the
// previous Audit (found by xmin, not by what the harness believes
// the step did), with all their attempts; the journal from the offset.
func TestScopedAuditSeesEveryWrite(t *testing.T) {
	ctx := context.Background()
	w, err := NewPostgresWorkers(ctx, 1, fencing.VariantNone, sharedPG(t).NewDatabase)
	require.NoError(t, err)
	defer w.Close()
	pg, err := w.Target(ctx, 0, 42)
	require.NoError(t, err)
	now := fuzz.Epoch
	var jobs []string
	for range 3 {
		rep, err := pg.CreateJob(ctx, now, protocol.CreateJobRequest{BuyerID: fuzz.WorldBuyers[0].ID, Service: "synthetic.mp4",
			Params: map[string]string{"seed": "1"}, Input: protocol.InputRef{Bytes: 4096, SHA256: strings.Repeat("ab", 32)},
			MaxAttempts: 2, AdmissionWindow: time.Hour})
		require.NoError(t, err)
		require.Equal(t, protocol.CodeCreated, rep.Code, rep.Message)
		jobs = append(jobs, rep.JobID)
	}
	full, err := pg.Snapshot(ctx)
	require.NoError(t, err)
	require.Len(t, full.Jobs, 3)

	vs, first, unchanged, err := pg.Audit(ctx, &fuzz.RowScope{})
	require.NoError(t, err)
	require.Empty(t, vs)
	require.False(t, unchanged)
	require.Equal(t, full, first, "the first audit has no mark yet: every row counts as written")
	_, whole, unchanged, err := pg.Audit(ctx, nil)
	require.NoError(t, err)
	require.False(t, unchanged)
	require.Equal(t, full, whole)

	_, none, unchanged, err := pg.Audit(ctx, &fuzz.RowScope{JournalFrom: len(full.Journal)})
	require.NoError(t, err)
	require.True(t, unchanged, "nothing was written since the previous audit, and the model changed nothing")
	require.Equal(t, protocol.Snapshot{}, none)
	_, quiet, unchanged, err := pg.Audit(ctx, &fuzz.RowScope{JournalFrom: len(full.Journal), Changed: true})
	require.NoError(t, err)
	require.False(t, unchanged, "the model changed: the scope is projected")
	require.Empty(t, quiet.Jobs, "nothing was written since the previous audit")
	require.Empty(t, quiet.Journal)
	require.Equal(t, full.Buyers, quiet.Buyers, "buyers are always whole")
	require.Equal(t, full.Devices, quiet.Devices, "devices are always whole")

	// A write the harness knows nothing of (no journal row, no reply)
	// still puts its job in the next scoped projection.
	_, err = pg.pool.Exec(ctx, `UPDATE jobs SET max_attempts = max_attempts WHERE id = $1`, jobs[1])
	require.NoError(t, err)
	_, rogue, _, err := pg.Audit(ctx, &fuzz.RowScope{Jobs: []string{jobs[2], "not-a-uuid"}})
	require.NoError(t, err)
	want := []string{jobs[1], jobs[2]}
	got := jobIDs(rogue)
	require.ElementsMatch(t, want, got)
	// So does a write to a job's hold alone.
	_, err = pg.pool.Exec(ctx, `UPDATE holds SET amount_cents = amount_cents WHERE job_id = $1`, jobs[0])
	require.NoError(t, err)
	_, hold, _, err := pg.Audit(ctx, &fuzz.RowScope{JournalFrom: 1})
	require.NoError(t, err)
	require.Equal(t, []string{jobs[0]}, jobIDs(hold))
	require.True(t, reflect.DeepEqual(full.Journal[1:], hold.Journal), "the journal from the offset on")
}

// TestScopedCompareFindsWhatWholeCompareFinds runs every broken service
// layer with the whole projection compared after every step (K=1) and with
// the default schedule (touched rows every step, the whole every K): the
// same seeds fail, at the same step, with the same text.
func TestScopedCompareFindsWhatWholeCompareFinds(t *testing.T) {
	variants := ServerVariants()
	if len(variants) == 0 {
		t.Skip("no broken variants in this build (-tags mutations)")
	}
	type found struct {
		seed   uint64
		step   int
		detail string
	}
	run := func(mut fencing.Variant, every int) []found {
		c, done := setup(t, mut, 2)
		defer done()
		c.Seeds, c.Steps, c.ShrinkBudget = seeds(500, 6), 60, 1
		c.Options.FullCompareEvery = every
		res, err := c.Run(context.Background())
		require.NoError(t, err)
		var out []found
		for _, f := range res.Failures {
			out = append(out, found{f.Seed, f.Result.Failure.Step, f.Result.Failure.Detail})
		}
		return out
	}
	caught := 0
	for _, mut := range variants {
		whole := run(mut, 1)
		require.Equal(t, whole, run(mut, 0), "variant %s", mut)
		if len(whole) > 0 {
			caught++
		}
	}
	require.Positive(t, caught, "no variant failed: the comparison was never exercised")
	t.Logf("%d of %d variants caught in 6 seeds x 60 steps, identically", caught, len(variants))
}
