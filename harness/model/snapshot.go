package model

import (
	"slices"

	"github.com/rendermac/rendermac/protocol"
)

// Snapshot projects the model's state as the contract's rows, in the orders
// protocol.Snapshot documents: jobs by (created_at, id), attempts by job then
// attempt_number, buyers and devices by id, the journal in append order. It
// shares no memory with the model. A device's LiveAttempts is its occupied
// slot counter, so a slot leak shows in the comparison with Postgres too.
func (m *ExecutionModel) Snapshot() protocol.Snapshot {
	s := protocol.Snapshot{
		Jobs:     make([]protocol.JobRow, 0, len(m.allJobs)),
		Attempts: make([]protocol.AttemptRow, 0, len(m.attemptLog)),
		Buyers:   make([]protocol.BuyerRow, 0, len(m.buyerList)),
		Devices:  make([]protocol.DeviceRow, 0, len(m.deviceList)),
		Journal:  slices.Clone(m.journal),
	}
	for _, j := range m.allJobs {
		s.Jobs = append(s.Jobs, j.row)
		for _, a := range j.attempts {
			s.Attempts = append(s.Attempts, a.row)
		}
	}
	for _, b := range m.buyerList {
		s.Buyers = append(s.Buyers, protocol.BuyerRow{ID: b.id, BalanceCents: b.balance, HeldCents: b.held,
			CapturedCents: b.captured})
	}
	for _, d := range m.deviceList {
		s.Devices = append(s.Devices, protocol.DeviceRow{ID: d.id, Status: d.status, LiveAttempts: d.occupied,
			LastSeenAt: d.lastSeen})
	}
	if s.Journal == nil {
		s.Journal = []protocol.EventRow{}
	}
	return s
}
