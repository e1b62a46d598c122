package soak

import (
	"sync"
	"sync/atomic"
)

// AcceptedJobs is the set of job ids the API accepted (201) during a run,
// which the checks require to end terminal; safe for concurrent use. The
// soak and the fleet run both keep one.
type AcceptedJobs struct {
	mu  sync.Mutex
	ids map[string]bool
	n   atomic.Int64
}

// Add records an accepted job.
func (a *AcceptedJobs) Add(id string) {
	a.mu.Lock()
	if a.ids == nil {
		a.ids = map[string]bool{}
	}
	a.ids[id] = true
	a.mu.Unlock()
	a.n.Add(1)
}

// Count is how many acceptances were recorded.
func (a *AcceptedJobs) Count() int64 { return a.n.Load() }

// IDs returns the accepted job ids, in no order.
func (a *AcceptedJobs) IDs() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]string, 0, len(a.ids))
	for id := range a.ids {
		out = append(out, id)
	}
	return out
}
