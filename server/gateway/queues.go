package gateway

import (
	"sync"
	"sync/atomic"
)

// emptyQueues remembers which services a Lease last found without a
// leasable job, so that a slot freed (a commit or fail result, a slots
// report, a hello) while nothing new was announced costs no Lease
// transaction that could only answer no_job. When a fleet drains the
// queue, each device's next lease would otherwise find it empty in a
// transaction of its own, and on a fleet of idle Macs that is every
// result and every reconnect.
//
// A job becomes leasable only by a create or a requeue, and both announce
// it on JobsChannel in their own transaction; every such announcement, the
// poll's finding and a local requeue bump gen before they wake anybody.
// A service is skipped only while gen has not moved since before the
// Lease that found it empty began, so a job committed after that Lease's
// snapshot has always bumped gen by the time its wake-up runs. The memo
// is trusted only while the listener is subscribed: notifications that
// arrive while it is down are lost, and its resubscribe bumps gen.
//
// What it can miss is what an offer pass misses anyway: a queued job
// skipped because another transaction held its row (FOR UPDATE SKIP
// LOCKED) and then let it go without a requeue. The poll finds that job,
// as it did before, within PollInterval.
type emptyQueues struct {
	gen     atomic.Uint64
	trusted atomic.Bool

	mu    sync.Mutex
	empty map[string]uint64 // service -> gen read before the Lease that found it empty
}

// changed says a job may have become leasable: every memo is stale.
func (q *emptyQueues) changed() { q.gen.Add(1) }

// trust turns the memo on (the listener is subscribed) or off, and makes
// every memo stale either way.
func (q *emptyQueues) trust(on bool) {
	q.trusted.Store(on)
	q.changed()
}

// now is the generation a Lease about to begin must pass to found.
func (q *emptyQueues) now() uint64 { return q.gen.Load() }

// known reports whether every one of services was found empty by a Lease
// that began at the current generation: nothing was announced since.
func (q *emptyQueues) known(services []string) bool {
	if !q.trusted.Load() || len(services) == 0 {
		return false
	}
	gen := q.gen.Load()
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, sv := range services {
		if at, ok := q.empty[sv]; !ok || at != gen {
			return false
		}
	}
	return true
}

// found records that a Lease begun at generation gen found no job of
// services. A memo never goes back to an older generation: a slow Lease
// must not overwrite what a later one found.
func (q *emptyQueues) found(services []string, gen uint64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.empty == nil {
		q.empty = map[string]uint64{}
	}
	for _, sv := range services {
		q.empty[sv] = max(q.empty[sv], gen)
	}
}
