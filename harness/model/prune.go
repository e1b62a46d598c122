package model

import (
	"slices"
	"time"

	"github.com/rendermac/rendermac/protocol"
)

// Prune is retention (SPEC section 3, Prune): it removes every finished job
// (succeeded, cancelled, failed) whose terminal time is before olderThan,
// with its attempts, journal rows, hold, webhook and idempotency key, and
// returns what it removed. Unfinished jobs and jobs finished at or after
// olderThan stay as they are. A pruned job's captured hold stays counted
// in its buyer's captured cents, as pruned (invariant 7).
func (m *ExecutionModel) Prune(olderThan time.Time) protocol.PruneResult {
	var res protocol.PruneResult
	gone := map[string]bool{}
	m.allJobs = slices.DeleteFunc(m.allJobs, func(j *job) bool {
		if !j.row.Status.Terminal() || !j.finishedAt.Before(olderThan) {
			return false
		}
		gone[j.row.ID] = true
		m.drop(j, &res)
		return true
	})
	if len(gone) == 0 {
		return res
	}
	m.attemptLog = m.dropAttempts(m.attemptLog, gone, &m.chk.attemptsSeen)
	seen := m.chk.journalSeen
	kept := m.journal[:0]
	for i, e := range m.journal {
		if gone[e.JobID] {
			res.Events++
			if i < seen {
				m.chk.journalSeen--
			}
			continue
		}
		kept = append(kept, e)
	}
	m.journal = kept
	return res
}

// drop removes one finished job's own state: its attempts from the index,
// its idempotency key, its hold into the buyer's pruned cents.
func (m *ExecutionModel) drop(j *job, res *protocol.PruneResult) {
	res.Jobs++
	res.Holds++
	res.Webhooks += j.row.Webhooks
	res.Attempts += len(j.attempts)
	for _, a := range j.attempts {
		delete(m.attempts, a.row.ID)
	}
	delete(m.jobs, j.row.ID)
	for k, v := range m.idem {
		if v == j {
			delete(m.idem, k)
		}
	}
	if j.row.HoldStatus == protocol.HoldCaptured {
		j.buyer.pruned += j.row.HoldCents
	}
	j.pruned = true
	m.chk.pruned = append(m.chk.pruned, j)
}

// dropAttempts is log without the attempts of the jobs in gone, moving
// *seen (an index into log) back by those before it.
func (m *ExecutionModel) dropAttempts(log []*attempt, gone map[string]bool, seen *int) []*attempt {
	kept := log[:0]
	at := *seen
	for i, a := range log {
		if gone[a.row.JobID] {
			if i < at {
				*seen--
			}
			continue
		}
		kept = append(kept, a)
	}
	return kept
}
