package fuzz

import (
	"context"
	"reflect"

	"github.com/rendermac/rendermac/protocol"
)

// DefaultFullCompareEvery is K, how often (in steps) a run compares the
// targets' whole projections when Options.FullCompareEvery is 0; between
// those steps it compares the rows each step could have touched.
const DefaultFullCompareEvery = 10

// RowScope is the part of the projection one step could have touched, as
// the runner asks an Auditor for it.
type RowScope struct {
	// Jobs are the jobs the first target (the model) changed in the step
	// and the jobs every target's replies named.
	Jobs []string
	// JournalFrom is the number of journal rows the targets agreed on
	// after the previous step.
	JournalFrom int
	// Whole asks for the whole projection: Snapshot's.
	Whole bool
	// Changed says the first target's projection changed in the step (it
	// differs from the one at the previous check), so an Auditor may
	// expect that it wrote rows too. When it is false, an Auditor that
	// finds it wrote no row since its previous Audit may answer
	// "unchanged" without projecting: both sides are then as they were at
	// the previous check, whose comparison passed. So it must be true
	// whenever the first target's projection changed.
	Changed bool
}

// Auditor is a Target that checks its invariants and projects its rows in
// one go (for a database: one round trip), and can project only a scope.
type Auditor interface {
	// Audit returns CheckInvariants' lines and a projection: Snapshot's
	// when scope is nil or scope.Whole; otherwise the jobs in scope.Jobs and every job
	// whose rows (its own, its hold, attempts or webhooks) the target wrote
	// since its previous Audit (every job on the first), each with
	// all its attempts, in Snapshot's order; every buyer and device; and
	// the journal rows from scope.JournalFrom on. Or, only when scope is
	// neither nil nor Whole nor Changed: unchanged and no projection, when
	// the target wrote (and deleted) no row its projection reads since its
	// previous Audit, so its projection is what it was then.
	Audit(ctx context.Context, scope *RowScope) (lines []string, snap protocol.Snapshot, unchanged bool, err error)
}

// touched remembers the first target's projection at the previous check,
// to tell which jobs a step changed there.
type touched struct {
	jobs     map[string]protocol.JobRow
	attempts map[string]protocol.AttemptRow
	buyers   []protocol.BuyerRow
	devices  []protocol.DeviceRow
	journal  int
}

// scope is the RowScope of the step just played: the jobs whose rows (or
// attempts) differ in now from the previous check, plus the jobs the
// replies named; and it remembers now for the next step.
func (t *touched) scope(now protocol.Snapshot, replies []outcome) *RowScope {
	s := &RowScope{JournalFrom: t.journal}
	seen := map[string]bool{}
	add := func(id string) {
		if id != "" && !seen[id] {
			seen[id] = true
			s.Jobs = append(s.Jobs, id)
		}
	}
	jobs := make(map[string]protocol.JobRow, len(now.Jobs))
	for _, j := range now.Jobs {
		if old, ok := t.jobs[j.ID]; !ok || !reflect.DeepEqual(old, j) {
			add(j.ID)
		}
		jobs[j.ID] = j
	}
	attempts := make(map[string]protocol.AttemptRow, len(now.Attempts))
	for _, a := range now.Attempts {
		if old, ok := t.attempts[a.ID]; !ok || !reflect.DeepEqual(old, a) {
			add(a.JobID)
		}
		attempts[a.ID] = a
	}
	s.Changed = len(s.Jobs) > 0 || len(now.Jobs) != len(t.jobs) || len(now.Attempts) != len(t.attempts) ||
		len(now.Journal) != t.journal ||
		!reflect.DeepEqual(now.Buyers, t.buyers) || !reflect.DeepEqual(now.Devices, t.devices)
	for _, o := range replies {
		for _, rep := range o.replies {
			add(rep.JobID)
		}
	}
	t.jobs, t.attempts, t.journal = jobs, attempts, len(now.Journal)
	t.buyers, t.devices = now.Buyers, now.Devices
	return s
}

// restrict is the part of the first target's projection full that a scoped
// Audit answered with got: the jobs in the scope or in got (so a job one
// side has and the other lacks shows), their attempts, every buyer and
// device, and the journal from the scope's start.
func (s *RowScope) restrict(full, got protocol.Snapshot) protocol.Snapshot {
	in := map[string]bool{}
	for _, id := range s.Jobs {
		in[id] = true
	}
	for _, j := range got.Jobs {
		in[j.ID] = true
	}
	out := protocol.Snapshot{Buyers: full.Buyers, Devices: full.Devices}
	for _, j := range full.Jobs {
		if in[j.ID] {
			out.Jobs = append(out.Jobs, j)
		}
	}
	for _, a := range full.Attempts {
		if in[a.JobID] {
			out.Attempts = append(out.Attempts, a)
		}
	}
	if s.JournalFrom < len(full.Journal) {
		out.Journal = full.Journal[s.JournalFrom:]
	}
	return out
}
