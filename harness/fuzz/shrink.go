package fuzz

import "context"

// ShrinkBudget bounds how many candidate runs one shrink may spend.
const ShrinkBudget = 2000

// Shrink reduces a failing sequence to a smaller one that still fails with
// the same kind of failure: it cuts everything after the failing step, then
// removes chunks of events (halving the chunk size down to one), then
// replaces perturbed identities with the plain ones. It returns the smallest
// failing sequence found and its result.
func Shrink(ctx context.Context, f Factory, seq Sequence, opts Options, first RunResult, budget int) (Sequence, RunResult, error) {
	kind := first.Failure.Kind
	best, bestRes := seq, first
	best.Events = append([]Event(nil), seq.Events[:first.Failure.Step+1]...)
	runs := 0
	try := func(cand Sequence) (bool, error) {
		if runs >= budget {
			return false, nil
		}
		runs++
		res, err := Run(ctx, f, 0, cand, opts)
		if err != nil {
			return false, err
		}
		if res.Failure == nil || res.Failure.Kind != kind {
			return false, nil
		}
		best, bestRes = cand, res
		best.Events = best.Events[:res.Failure.Step+1]
		return true, nil
	}
	if ok, err := try(best); err != nil || !ok {
		// A run is a function of its sequence, so this means a target is not
		// deterministic: report the original rather than a wrong minimum.
		return seq, first, err
	}
	for chunk := len(best.Events) / 2; chunk >= 1; {
		removed := false
		for start := 0; start+chunk <= len(best.Events); {
			cand := Sequence{Seed: best.Seed, Events: append(append([]Event(nil), best.Events[:start]...), best.Events[start+chunk:]...)}
			ok, err := try(cand)
			if err != nil {
				return best, bestRes, err
			}
			if ok {
				removed = true
				continue
			}
			start += chunk
		}
		if !removed {
			chunk /= 2
		}
	}
	for i := range best.Events {
		plain := plainEvent(best.Events[i])
		if plain == best.Events[i] {
			continue
		}
		cand := Sequence{Seed: best.Seed, Events: append([]Event(nil), best.Events...)}
		cand.Events[i] = plain
		if _, err := try(cand); err != nil {
			return best, bestRes, err
		}
	}
	return best, bestRes, nil
}

// plainEvent is ev without its identity perturbations.
func plainEvent(ev Event) Event {
	switch ev.Op {
	case OpProgress, OpCommit, OpCommitBegin, OpCommitFinish, OpFail, OpWithdraw:
		ev.Attempt, ev.Epoch, ev.Token = 0, 0, TokenRight
		if ev.Op != OpCommitFinish {
			ev.Device = -1
		}
	case OpCancel:
		ev.Buyer = -1
	}
	return ev
}
