package fuzz

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/protocol"
)

// RowScope.Changed carries weight: when it is false, an Auditor that wrote
// nothing answers "unchanged" and the runner compares nothing. So every
// change of the first target's projection must set it, a row gone
// included, and a step that changed nothing must not.
func TestScopeChangedSeesEveryChangeOfTheProjection(t *testing.T) {
	base := protocol.Snapshot{
		Jobs:     []protocol.JobRow{{ID: "j1", Status: protocol.JobQueued}, {ID: "j2", Status: protocol.JobActive}},
		Attempts: []protocol.AttemptRow{{ID: "a1", JobID: "j2", Status: protocol.AttemptLeased}},
		Buyers:   []protocol.BuyerRow{{ID: "b1", BalanceCents: 10}},
		Devices:  []protocol.DeviceRow{{ID: "d1", Status: "online"}},
		Journal:  []protocol.EventRow{{Kind: "job", JobID: "j1"}},
	}
	edit := func(f func(*protocol.Snapshot)) protocol.Snapshot {
		s := base
		s.Jobs = append([]protocol.JobRow(nil), base.Jobs...)
		s.Attempts = append([]protocol.AttemptRow(nil), base.Attempts...)
		s.Buyers = append([]protocol.BuyerRow(nil), base.Buyers...)
		s.Devices = append([]protocol.DeviceRow(nil), base.Devices...)
		s.Journal = append([]protocol.EventRow(nil), base.Journal...)
		f(&s)
		return s
	}
	for name, now := range map[string]protocol.Snapshot{
		"job status":     edit(func(s *protocol.Snapshot) { s.Jobs[0].Status = protocol.JobCancelled }),
		"job gone":       edit(func(s *protocol.Snapshot) { s.Jobs = s.Jobs[:1] }),
		"job added":      edit(func(s *protocol.Snapshot) { s.Jobs = append(s.Jobs, protocol.JobRow{ID: "j3"}) }),
		"attempt status": edit(func(s *protocol.Snapshot) { s.Attempts[0].Status = protocol.AttemptRunning }),
		"attempt gone":   edit(func(s *protocol.Snapshot) { s.Attempts = nil }),
		"buyer":          edit(func(s *protocol.Snapshot) { s.Buyers[0].BalanceCents = 9 }),
		"device":         edit(func(s *protocol.Snapshot) { s.Devices[0].Status = "offline" }),
		"journal row":    edit(func(s *protocol.Snapshot) { s.Journal = append(s.Journal, protocol.EventRow{Kind: "job"}) }),
	} {
		var seen touched
		require.True(t, seen.scope(base, nil).Changed, "the first check")
		require.False(t, seen.scope(base, nil).Changed, "%s: nothing changed yet", name)
		require.True(t, seen.scope(now, nil).Changed, name)
		require.False(t, seen.scope(now, nil).Changed, "%s: nothing changed since", name)
	}
}
