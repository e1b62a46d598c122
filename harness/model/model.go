package model

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/rendermac/rendermac/protocol"
)

// ExecutionModel is the storage-free model of SPEC section 3. It is not safe
// for concurrent use: it is a step function, driven by one goroutine.
type ExecutionModel struct {
	cfg Config
	ids protocol.IDSource

	buyers   map[string]*buyer
	devices  map[string]*device
	jobs     map[string]*job
	attempts map[string]*attempt
	idem     map[idemKey]*job
	// paused holds the paused services: Lease offers none of their jobs.
	paused map[string]bool

	// buyerList and deviceList are in id order, allJobs in (created_at, id)
	// order: the orders Snapshot and Sweep need, kept on insert so that no
	// step sorts.
	buyerList  []*buyer
	deviceList []*device
	allJobs    []*job
	// open holds the non-terminal jobs in (created_at, id) order: the only
	// jobs Lease and Sweep have to look at.
	open []*job
	// attemptLog is every attempt in insertion order, so the checker can
	// visit each new attempt exactly once.
	attemptLog []*attempt
	journal    []protocol.EventRow

	// terminal counts job terminal transitions by status; Sweep reports the
	// difference across its steps.
	terminal struct{ succeeded, failed, cancelled int }
	// scratch is reused by Sweep to iterate open while it shrinks.
	scratch []*job

	chk checker
}

type idemKey struct{ buyerID, key string }

type buyer struct {
	id                      string
	balance, held, captured int64
	// initial is every credit AddBuyer gave: balance + held + captured must
	// always equal it.
	initial int64
	// chkHeld and chkCaptured are the checker's own tallies of the buyer's
	// holds, summed from the jobs it has seen; the operations never read them.
	chkHeld, chkCaptured int64
	dirty                bool
}

type device struct {
	id         string
	services   []string
	slotsTotal int
	// occupied is the slot counter: incremented on lease, decremented when
	// an attempt leaves the live set. It is bookkeeping, not derived, so that
	// invariant 9 compares two independent numbers.
	occupied int
	status   protocol.DeviceStatus
	lastSeen time.Time
	// chkLive is the checker's tally of the device's live attempts.
	chkLive int
	dirty   bool
}

type job struct {
	row         protocol.JobRow
	buyer       *buyer
	fingerprint string
	attempts    []*attempt
	// outputKey and outputBytes complete the output the row records only by
	// its sha256 (invariant 8).
	outputKey   string
	outputBytes int64
	// settles counts hold settlements and webhookEvent is the event of the
	// last outbox row: invariant 7 wants exactly one of each, matching.
	settles      int
	webhookEvent protocol.JobStatus
	// requeues records the facts at each requeue, for invariant 5.
	requeues []requeueFact
	chk      jobCheck
}

// requeueFact is what was true when a job went back to queued: the
// attempts it had spent (withdrawn offers not counted) against its budget.
type requeueFact struct {
	spent, maxAttempts int
	at, deadline       time.Time
}

// jobCheck is the checker's state of a job; the operations never read it.
type jobCheck struct {
	replayed      protocol.JobStatus // status the journal replays to
	succeededFrom protocol.JobStatus // From of the journal row into succeeded
	hold          protocol.HoldStatus
	requeuesSeen  int
	dirty         bool
}

type attempt struct {
	row    protocol.AttemptRow
	job    *job
	device *device
	// claimed is the output the commit claimed; outputOK the verification
	// outcome fixed when the attempt entered committing.
	claimed  protocol.Output
	outputOK bool
	fence    commitFence
	// chkReplayed and chkLive are the checker's replayed status and the
	// liveness it last counted in its device tally.
	chkReplayed protocol.AttemptStatus
	chkLive     bool
}

// commitFence records what transaction 1 was shown when it moved the
// attempt to committing, so that invariant 3 can re-judge the fence
// independently of the decision that was taken.
type commitFence struct {
	entered         bool
	jobID, deviceID string
	epoch           int
	tokenOK         bool
	unexpired       bool
}

// New returns an empty model. cfg's zero fields take the contract's
// defaults; ids is the only source of job ids, attempt ids and commit tokens.
func New(cfg Config, ids protocol.IDSource) *ExecutionModel {
	if ids == nil {
		panic("sim: New needs an IDSource")
	}
	return &ExecutionModel{
		cfg:      cfg.withDefaults(),
		ids:      ids,
		buyers:   make(map[string]*buyer),
		devices:  make(map[string]*device),
		jobs:     make(map[string]*job),
		attempts: make(map[string]*attempt),
		idem:     make(map[idemKey]*job),
		paused:   make(map[string]bool),
		chk:      newChecker(),
	}
}

// AddBuyer credits a buyer with balanceCents. A second call for the same id
// credits it again; conservation (invariant 7) is checked against the sum.
// A negative credit is a driver bug and panics.
func (m *ExecutionModel) AddBuyer(id string, balanceCents int64) {
	if balanceCents < 0 {
		panic(fmt.Sprintf("sim: AddBuyer %s: negative balance %d", id, balanceCents))
	}
	b, ok := m.buyers[id]
	if !ok {
		b = &buyer{id: id}
		m.buyers[id] = b
		i, _ := slices.BinarySearchFunc(m.buyerList, id, func(x *buyer, id string) int { return cmp.Compare(x.id, id) })
		m.buyerList = slices.Insert(m.buyerList, i, b)
	}
	b.balance += balanceCents
	b.initial += balanceCents
}

// AddDevice pairs a device offering services with slotsTotal slots. It starts
// offline with a zero last_seen_at, as a paired device that has not connected
// yet. Pairing an id twice is a driver bug and panics.
func (m *ExecutionModel) AddDevice(id string, services []string, slotsTotal int) {
	if _, ok := m.devices[id]; ok {
		panic(fmt.Sprintf("sim: AddDevice %s: already paired", id))
	}
	d := &device{id: id, services: slices.Clone(services), slotsTotal: slotsTotal, status: protocol.DeviceOffline}
	m.devices[id] = d
	i, _ := slices.BinarySearchFunc(m.deviceList, id, func(x *device, id string) int { return cmp.Compare(x.id, id) })
	m.deviceList = slices.Insert(m.deviceList, i, d)
}

// RevokeDevice marks a device revoked: Lease answers it not_found from now
// on and no step makes it online again. Its live attempts keep their rows
// and are swept as lost when their leases expire. An unknown id is a no-op.
func (m *ExecutionModel) RevokeDevice(id string) {
	if d, ok := m.devices[id]; ok {
		d.status = protocol.DeviceRevoked
	}
}

// LiveAttempt returns the row of the job's live attempt (leased..committing),
// if the job exists and has one.
func (m *ExecutionModel) LiveAttempt(jobID string) (protocol.AttemptRow, bool) {
	j, ok := m.jobs[jobID]
	if !ok {
		return protocol.AttemptRow{}, false
	}
	if a := j.liveAttempt(); a != nil {
		return a.row, true
	}
	return protocol.AttemptRow{}, false
}

// liveAttempt returns the job's newest live attempt. Only the newest can be
// live while invariant 1 holds; scanning backwards finds it first.
func (j *job) liveAttempt() *attempt {
	for i := len(j.attempts) - 1; i >= 0; i-- {
		if j.attempts[i].row.Status.Live() {
			return j.attempts[i]
		}
	}
	return nil
}

// offers reports whether the device offers the service.
func (d *device) offers(service string) bool {
	return slices.Contains(d.services, service)
}

// compareJobs orders jobs by (created_at, id), the contract's queue order.
func compareJobs(a, b *job) int {
	if c := a.row.CreatedAt.Compare(b.row.CreatedAt); c != 0 {
		return c
	}
	return cmp.Compare(a.row.ID, b.row.ID)
}

// insertOrdered inserts j into list, kept in (created_at, id) order.
func insertOrdered(list []*job, j *job) []*job {
	i, _ := slices.BinarySearchFunc(list, j, compareJobs)
	return slices.Insert(list, i, j)
}

// normalize gives now the database's precision: UTC, microseconds, dropping
// nanoseconds the way pgx encodes timestamptz, so that comparisons such as
// lease_expires_at <= now agree with Postgres to the microsecond.
func normalize(t time.Time) time.Time {
	return t.UTC().Truncate(time.Microsecond)
}
