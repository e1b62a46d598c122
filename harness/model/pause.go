package model

import (
	"slices"
	"sort"
	"time"

	"github.com/rendermac/rendermac/protocol"
)

// PauseService stops Lease offering jobs of the service: paused, or
// already_paused when it was (idempotent, nothing changes), or not_found
// for a service the catalogue lacks. Nothing else changes: queued jobs stay
// queued (Sweep still fails them at their admission deadline) and live
// attempts go on. Who paused it is the service layer's audit row, which the
// model does not keep.
func (m *ExecutionModel) PauseService(_ time.Time, service string) protocol.Reply {
	if _, ok := m.service(service); !ok {
		return protocol.Reply{Code: protocol.CodeNotFound}
	}
	if m.paused[service] {
		return protocol.Reply{Code: protocol.CodeAlreadyPaused}
	}
	m.paused[service] = true
	return protocol.Reply{Code: protocol.CodePaused}
}

// ResumeService offers the service's jobs again: resumed, or not_paused
// when it was not paused, or not_found.
func (m *ExecutionModel) ResumeService(_ time.Time, service string) protocol.Reply {
	if _, ok := m.service(service); !ok {
		return protocol.Reply{Code: protocol.CodeNotFound}
	}
	if !m.paused[service] {
		return protocol.Reply{Code: protocol.CodeNotPaused}
	}
	delete(m.paused, service)
	return protocol.Reply{Code: protocol.CodeResumed}
}

// PausedServices lists the paused services by name.
func (m *ExecutionModel) PausedServices() []string {
	out := make([]string, 0, len(m.paused))
	for s := range m.paused {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// PausedBlocks reports whether the pause rule decides a Lease of the device
// now: the device can take a job (known, not revoked, a free slot) and a
// queued job within its deadline, of a service the device offers, is not
// offered only because its service is paused. The fuzzer counts such a
// lease as the coverage outcome of the rule.
func (m *ExecutionModel) PausedBlocks(now time.Time, deviceID string) bool {
	d, ok := m.devices[deviceID]
	if !ok || len(m.paused) == 0 || d.status == protocol.DeviceRevoked || d.occupied >= d.slotsTotal {
		return false
	}
	now = normalize(now)
	return slices.ContainsFunc(m.open, func(j *job) bool {
		return j.row.Status == protocol.JobQueued && j.row.AdmissionDeadline.After(now) &&
			d.offers(j.row.Service) && m.paused[j.row.Service]
	})
}

// PausedExpires reports whether a Sweep now fails a queued job of a paused
// service at its admission deadline: the pause holds the job back, never
// its deadline.
func (m *ExecutionModel) PausedExpires(now time.Time) bool {
	if len(m.paused) == 0 {
		return false
	}
	now = normalize(now)
	return slices.ContainsFunc(m.open, func(j *job) bool {
		return j.row.Status == protocol.JobQueued && !j.row.AdmissionDeadline.After(now) && m.paused[j.row.Service]
	})
}
