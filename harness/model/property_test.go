package model

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/rendermac/rendermac/protocol"
)

// TestMachineRapid is the state-machine property: whatever rapid does with
// create, lease, progress, commit, fail, cancel, tick and sweep, perturbed
// frames get the contract's refusals and no invariant breaks, after every
// single action.
func TestMachineRapid(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		mc := newMachine(VariantNone, rapid.Uint64().Draw(rt, "ids_seed"), true)
		c := rapidChooser{rt}
		actions := map[string]func(*rapid.T){}
		for name, act := range mc.actions() {
			actions[name] = func(*rapid.T) { act(c) }
		}
		actions[""] = func(rt *rapid.T) {
			if err := mc.check(); err != nil {
				rt.Fatal(err)
			}
		}
		rt.Repeat(actions)
	})
}

// walk runs the machine for steps actions drawn from a PRNG seeded with
// seed, checking after each; it returns the machine and the failing step.
func walk(mut Variant, seed uint64, steps int, strict bool) (*machine, int, error) {
	mc := newMachine(mut, seed, strict)
	acts := mc.actions()
	names := make([]string, 0, len(acts))
	for name := range acts {
		names = append(names, name)
	}
	slices.Sort(names) // map order must not leak into a seeded run
	c := prngChooser{rand.New(rand.NewPCG(seed, 0x5eed))}
	for i := range steps {
		acts[names[c.r.IntN(len(names))]](c)
		if err := mc.check(); err != nil {
			return mc, i, err
		}
	}
	return mc, steps, nil
}

// TestMachineWalk runs longer seeded walks than rapid's default and asserts
// they reached every reply code of the contract, so a clean run means the
// branches were exercised, not skipped.
func TestMachineWalk(t *testing.T) {
	t.Parallel()
	seen := map[protocol.Code]int{}
	for seed := range uint64(60) {
		mc, step, err := walk(VariantNone, seed, 400, true)
		require.NoError(t, err, "seed %d step %d", seed, step)
		for code, n := range mc.codes {
			seen[code] += n
		}
	}
	for _, code := range []protocol.Code{protocol.CodeCreated, protocol.CodeValidation, protocol.CodeInsufficientFunds,
		protocol.CodeIdempotencyConflict, protocol.CodeLeaseOffer, protocol.CodeNoJob, protocol.CodeNoSlot,
		protocol.CodeNotFound, protocol.CodeProgressOK, protocol.CodeLeaseConflict, protocol.CodeCommitPending,
		protocol.CodeCommitOK, protocol.CodeCommitConflict, protocol.CodeAttemptNotCommittable,
		protocol.CodeLeaseExpired, protocol.CodeJobCancelled, protocol.CodeVerificationFailed, protocol.CodeFailOK,
		protocol.CodeFailConflict, protocol.CodeBadFailureCode, protocol.CodeCancelled, protocol.CodeCancelling,
		protocol.CodeJobTerminal} {
		require.Positive(t, seen[code], "the walks never reached %s", code)
	}
	t.Logf("reply codes reached: %v", seen)
}
