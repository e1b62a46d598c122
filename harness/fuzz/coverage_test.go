package fuzz

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/harness/model"
)

// Coverage names what a hand-written run reached: faults resolved against
// the job they hit (a "stale" token on a first attempt is a wrong token, a
// "foreign" device that is the owner is no fault), the phase each fenced
// fault hit, replies by code and reason, and the journal's transitions.
func TestRunCoverageCountsWhatWasReached(t *testing.T) {
	t.Parallel()
	lines := []string{
		"create buyer=0 service=synthetic.mp4 max=3 window=600 idem=0 param=0",
		"lease dev=0",
		"progress job=0 att=0 dev=1 epoch=0 phase=downloading",         // foreign device, refused
		"progress job=0 att=0 dev=0 epoch=0 phase=downloading",         // the owner: no fault
		"fail job=0 att=0 dev=-1 epoch=0 token=stale code=no_capacity", // no older attempt: wrong token
		"fail job=0 att=0 dev=-1 epoch=0 token=right code=no_capacity", // requeued
		"lease dev=0", // attempt 2
		"commit job=0 att=0 dev=-1 epoch=0 token=stale ok=true", // attempt 1's token
		"commit job=0 att=1 dev=-1 epoch=0 token=right ok=true", // attempt 1, failed
		"tick ms=120000", // a clock jump
		"create buyer=0 service=no.such.service max=0 window=600 idem=0 param=3", // three create faults
	}
	seq := Sequence{Seed: 1}
	for _, l := range lines {
		ev, err := ParseEvent(l)
		require.NoError(t, err, l)
		seq.Events = append(seq.Events, ev)
	}
	res, err := Run(context.Background(), modelFactory(model.VariantNone), 0, seq, Options{Coverage: true})
	require.NoError(t, err)
	require.Nil(t, res.Failure)
	cov := res.Coverage
	require.Equal(t, map[string]int64{FaultForeignDevice: 1, FaultWrongToken: 1, FaultStaleToken: 1, FaultStaleAttempt: 1,
		FaultClockJump: 1, FaultUnknownService: 1, FaultBadMaxAttempts: 1, FaultUnstorableParams: 1}, cov.Faults)
	require.Equal(t, map[string]int64{"foreign_device@leased": 1, "wrong_token@downloading": 1, "stale_token@leased": 1,
		"stale_attempt@ended": 1}, cov.FaultPhases)
	require.Equal(t, map[string]int64{"created": 1, "lease_offer": 2, "lease_conflict/identity_mismatch": 1,
		"progress_ok": 1, "fail_conflict": 1, "fail_ok": 1, "commit_conflict": 1, "attempt_not_committable": 1,
		"validation_error": 1}, cov.Replies)
	require.Equal(t, map[string]int64{"queued->active": 2, "active->queued": 1}, cov.JobTransitions)
	require.Equal(t, map[string]int64{"leased->downloading": 1, "downloading->failed": 1}, cov.AttemptTransitions)
}

// A campaign's coverage is the sum of its seeds', and it adds the
// frame-level faults (duplicate, reorder) that the events alone do not show.
func TestCampaignCoverageSumsSeeds(t *testing.T) {
	t.Parallel()
	c := Campaign{Factory: modelFactory(model.VariantNone), Gen: DefaultGenConfig, Seeds: []uint64{1, 2, 3}, Steps: 200, Workers: 1}
	all, err := c.Run(context.Background())
	require.NoError(t, err)
	var sum Coverage
	for _, s := range c.Seeds {
		c.Seeds = []uint64{s}
		one, err := c.Run(context.Background())
		require.NoError(t, err)
		sum.Add(one.Coverage)
	}
	require.Equal(t, all.Coverage, sum)
	require.Positive(t, all.Coverage.Faults[FaultDuplicate]+all.Coverage.Faults[FaultReorder])
}

func TestWeights(t *testing.T) {
	t.Parallel()
	c := DefaultGenConfig
	require.NoError(t, c.SetWeight("cancel=0"))
	require.NoError(t, c.SetWeight(" commit = 30 "))
	require.Equal(t, 0, c.Weights[OpCancel])
	require.Equal(t, 30, c.Weights[OpCommit])
	for _, ev := range Generate(9, 2000, c).Events {
		require.NotEqual(t, OpCancel, ev.Op, "a weight of 0 still drew the op")
	}
	back, err := ParseWeights(c.WeightsString())
	require.NoError(t, err)
	require.Equal(t, c, back)
	require.ErrorContains(t, c.SetWeight("teleport=1"), `unknown op "teleport"`)
	require.ErrorContains(t, c.SetWeight("commit=x"), "N must be an integer from 0 to 1000")
	var zero GenConfig
	require.ErrorContains(t, zero.Validate(), "every op weight is 0")
}
