package model

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/protocol"
)

// Each variant is paired with a short sequence that must break the named
// invariant under the variant and keep everything clean without it, and the
// machine must find it on its own within a bounded seeded walk.
var variantCases = []struct {
	mut        Variant
	invariants []int
	// sequence drives b to the step the variant breaks and returns that
	// step's reply with the reply the correct model gives.
	sequence func(b *testBundle) (got protocol.Reply, correct protocol.Code)
}{
	{VariantCommitFromCancelling, []int{3, 4}, func(b *testBundle) (protocol.Reply, protocol.Code) {
		id := b.create(request(buyerRich, svcSynthetic))
		o := b.lease(devA)
		b.upload(devA, o)
		require.Equal(b.t, protocol.CodeCommitPending, b.m.CommitBegin(b.now, devA, commitOf(o), true).Code)
		require.Equal(b.t, protocol.CodeCancelling, b.m.Cancel(b.now, buyerRich, id).Code)
		require.Empty(b.t, b.m.CheckInvariants())
		return b.m.CommitFinish(b.now, o.JobID, o.AttemptID), protocol.CodeJobCancelled
	}},
	{VariantNoEpochCheck, []int{3}, func(b *testBundle) (protocol.Reply, protocol.Code) {
		b.create(request(buyerRich, svcSynthetic))
		o := b.lease(devA)
		b.upload(devA, o)
		c := commitOf(o)
		c.LeaseEpoch = 2
		return b.m.Commit(b.now, devA, c, true), protocol.CodeCommitConflict
	}},
	{VariantRequeuePastBudget, []int{5}, func(b *testBundle) (protocol.Reply, protocol.Code) {
		req := request(buyerRich, svcSynthetic)
		req.MaxAttempts = 1
		b.create(req)
		o := b.lease(devA)
		return b.m.Fail(b.now, devA, failOf(o, protocol.FailNoCapacity)), protocol.CodeFailOK
	}},
	{VariantWithdrawCharged, []int{5}, func(b *testBundle) (protocol.Reply, protocol.Code) {
		req := request(buyerRich, svcSynthetic)
		req.MaxAttempts = 1
		b.create(req)
		o := b.lease(devA)
		return b.m.Withdraw(b.now, devA, withdrawalOf(o)), protocol.CodeWithdrawn
	}},
	{VariantKeepSlot, []int{9}, func(b *testBundle) (protocol.Reply, protocol.Code) {
		b.create(request(buyerRich, svcSynthetic))
		o := b.lease(devA)
		return b.m.Fail(b.now, devA, failOf(o, protocol.FailRunnerFailed)), protocol.CodeFailOK
	}},
}

func invariantsOf(vs []protocol.Violation) []int {
	out := make([]int, 0, len(vs))
	for _, v := range vs {
		out = append(out, v.Invariant)
	}
	return out
}

func TestVariantTargeted(t *testing.T) {
	t.Parallel()
	for _, tc := range variantCases {
		t.Run(string(tc.mut), func(t *testing.T) {
			t.Parallel()
			good := setup(t, Config{})
			r, correct := tc.sequence(good)
			require.Equal(t, correct, r.Code)
			good.clean()

			bad := setup(t, Config{Variant: tc.mut})
			tc.sequence(bad)
			vs := bad.m.CheckInvariants()
			require.NotEmpty(t, vs)
			for _, inv := range tc.invariants {
				require.Contains(t, invariantsOf(vs), inv, "%v", vs)
			}
			t.Logf("%s caught: %v", tc.mut, vs)
		})
	}
}

// TestVariantSweepPaths shows the sweep half of the budget and slot
// variants: a lost attempt requeued past the budget, and a lost attempt's
// slot kept.
func TestVariantSweepPaths(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		mut Variant
		inv int
	}{{VariantRequeuePastBudget, 5}, {VariantKeepSlot, 9}} {
		b := setup(t, Config{Variant: tc.mut})
		req := request(buyerRich, svcSynthetic)
		req.MaxAttempts = 1
		b.create(req)
		b.lease(devA)
		b.tick(time.Minute)
		b.m.Sweep(b.now)
		require.Contains(t, invariantsOf(b.m.CheckInvariants()), tc.inv)
	}
}

// TestVariantFoundByMachine runs the state machine (loose: only the
// invariant checker judges) on each variant and requires that a seeded walk
// finds a violation of the expected invariant.
func TestVariantFoundByMachine(t *testing.T) {
	t.Parallel()
	for _, tc := range variantCases {
		t.Run(string(tc.mut), func(t *testing.T) {
			t.Parallel()
			for seed := range uint64(200) {
				mc, step, err := walk(tc.mut, seed, 500, false)
				if err == nil {
					continue
				}
				require.Subset(t, tc.invariants, invariantsOf(mc.violations)[:1], "%v", mc.violations)
				t.Logf("%s: seed %d, step %d: %v", tc.mut, seed, step, mc.violations)
				return
			}
			t.Fatalf("200 walks of 500 steps never caught %s", tc.mut)
		})
	}
}

// brokenIDs hands out a fixed token, and optionally stores the plaintext as
// its "hash": the broken sources invariant 6 must catch.
type brokenIDs struct {
	protocol.IDSource
	leakPlaintext bool
}

func (b brokenIDs) NewCommitToken() (string, string, error) {
	if b.leakPlaintext {
		return "plain", "plain", nil
	}
	return "same-token", protocol.HashCommitToken("same-token"), nil
}

func TestInvariant6CatchesBrokenTokens(t *testing.T) {
	t.Parallel()
	for _, leak := range []bool{false, true} {
		m := New(Config{}, brokenIDs{IDSource: seededIDs(3), leakPlaintext: leak})
		m.AddBuyer(buyerRich, 100)
		m.AddDevice(devA, []string{svcSynthetic}, 2)
		var vs []protocol.Violation
		for range 2 {
			require.Equal(t, protocol.CodeCreated, m.CreateJob(t0, request(buyerRich, svcSynthetic)).Code)
			require.Equal(t, protocol.CodeLeaseOffer, m.Lease(t0, devA).Code)
			vs = append(vs, m.CheckInvariants()...)
		}
		require.NotEmpty(t, vs)
		require.Equal(t, 6, vs[0].Invariant, "%v", vs)
	}
}
