package scenarios

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rendermac/rendermac/protocol"
)

// Two operations on one row, the first held inside its transaction (at
// create.before_insert or lease.before_pick, just after its row lock) while
// the second runs: the second must wait for the lock and then see the first
// one's writes. The fuzz campaigns run one operation at a time and the
// tests race them at random; these steps make the interleaving exact.
//
//	funds 10                      the buyer's account holds 10 cents
//	create j2 async               a create in the background
//	created j2 -> insufficient_funds
//	device d1 slots=1             a device no gateway session leases for
//	lease d1 as=l1 async          a service-layer Lease in the background
//	leased l1 -> lease_offer j1
//	await lock l2                 until a transaction waits on a row lock,
//	                              or l2 has finished without waiting

// scPending is an operation started in the background.
type scPending struct {
	what string
	done chan struct{}
	got  string // "created", "lease_offer J", or the refusal's code
	err  error
}

// background runs op on its own goroutine under name, for a later step to
// await. A name is used once per run.
func (r *scRun) background(name, what string, op func() (string, error)) error {
	r.mu.Lock()
	if _, dup := r.pending[name]; dup {
		r.mu.Unlock()
		return fmt.Errorf("%s was already started", name)
	}
	p := &scPending{what: what, done: make(chan struct{})}
	r.pending[name] = p
	r.mu.Unlock()
	r.tl.add(laneGateway, fmt.Sprintf("%s started in the background as %s", what, name))
	go func() {
		defer close(p.done)
		p.got, p.err = op()
	}()
	return nil
}

func (r *scRun) pendingOp(name string) (*scPending, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.pending[name]
	if p == nil {
		return nil, fmt.Errorf("nothing was started in the background as %q", name)
	}
	return p, nil
}

// finished reports whether the background operation has returned.
func (p *scPending) finished() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// outcome waits (up to the frame timeout) for the operation named by the
// step's first argument and checks it against the words after `->`.
func (r *scRun) outcome(st scStep) error {
	name := arg(st, 0)
	p, err := r.pendingOp(name)
	if err != nil {
		return err
	}
	if len(st.arrow) == 0 {
		return fmt.Errorf("want: %s NAME -> OUTCOME", st.cmd)
	}
	select {
	case <-p.done:
	case <-time.After(r.timeout):
		return fmt.Errorf("%s (%s) did not finish within %s", name, p.what, r.timeout)
	}
	if p.err != nil {
		return fmt.Errorf("%s (%s): %w", name, p.what, p.err)
	}
	r.reply(name + " -> " + p.got)
	if want := strings.Join(st.arrow, " "); p.got != want {
		return fmt.Errorf("%s (%s): want %s, got %s", name, p.what, want, p.got)
	}
	return nil
}

// waitPending lets every background operation finish (the run is over and
// its blocks released) before the rows are judged.
func (r *scRun) waitPending() {
	r.mu.Lock()
	list := make([]*scPending, 0, len(r.pending))
	for _, p := range r.pending {
		list = append(list, p)
	}
	r.mu.Unlock()
	deadline := time.After(r.timeout)
	for _, p := range list {
		select {
		case <-p.done:
		case <-deadline:
			return
		}
	}
}

// cmdCreated awaits a `create J async` and checks its outcome: created, or
// the API's refusal code.
// Example: created j2 -> insufficient_funds
func cmdCreated(r *scRun, st scStep) error { return r.outcome(st) }

// cmdFunds sets the scenario buyer's account (balance and initial credit)
// to N cents; only before any job exists, so the money invariant holds.
// Example: funds 10
func cmdFunds(r *scRun, st scStep) error {
	var cents int64
	if _, err := fmt.Sscanf(arg(st, 0), "%d", &cents); err != nil || cents < 0 {
		return fmt.Errorf("want: funds CENTS (a whole number >= 0), got %q", arg(st, 0))
	}
	tag, err := r.observer.Exec(r.ctx, `
UPDATE buyers SET balance_cents = $2, initial_cents = $2
WHERE id = $1 AND NOT EXISTS (SELECT 1 FROM holds WHERE buyer_id = $1)`, scBuyerID, cents)
	if err != nil {
		return fmt.Errorf("funds: %w", err)
	}
	if tag.RowsAffected() != 1 {
		return errors.New("funds: the buyer already has jobs; set the funds before the first create")
	}
	r.tl.add(laneDatabase, fmt.Sprintf("buyer's account set to %d cents", cents))
	return nil
}

// cmdRegister registers a device that no gateway session serves, for
// service-layer leases (`lease`): no offer loop leases for it behind the
// script's back.
// Example: register d1 slots=1
func cmdRegister(r *scRun, st scStep) error {
	name := arg(st, 0)
	slots, err := optInt(st, "slots", 1)
	if err != nil {
		return err
	}
	if name == "" || slots < 1 {
		return errors.New("want: register NAME [slots=N]")
	}
	r.mu.Lock()
	_, dup := r.devices[name]
	id := fmt.Sprintf("00000000-0000-4000-8000-%012x", 0xde01+len(r.devices))
	r.mu.Unlock()
	if dup {
		return fmt.Errorf("device %s exists", name)
	}
	if err := r.admin.CreateDevice(r.ctx, id, name, []string{scService}, slots, ""); err != nil {
		return err
	}
	r.mu.Lock()
	r.devices[name] = id
	r.mu.Unlock()
	r.setName(id, name)
	r.tl.add(laneDatabase, fmt.Sprintf("device %s registered with %d slot(s), no session", name, slots))
	return nil
}

// cmdLease runs one Lease of a `device` on the service layer at the
// pinned instant: `-> OUTCOME` checks it at once; `as=L async` runs it in
// the background for `leased L` to check.
// Example: lease d1 as=l1 async
func cmdLease(r *scRun, st scStep) error {
	r.mu.Lock()
	id, ok := r.devices[arg(st, 0)]
	r.mu.Unlock()
	if !ok {
		return fmt.Errorf("no device %q (register it with `device`)", arg(st, 0))
	}
	what := "Lease for " + arg(st, 0)
	if arg(st, 1) == "async" {
		as := st.opt("as", "")
		if as == "" {
			return errors.New("want: lease DEVICE as=NAME async")
		}
		return r.background(as, what, func() (string, error) { return r.lease(id) })
	}
	got, err := r.lease(id)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	r.reply("lease -> " + got)
	if want := strings.Join(st.arrow, " "); len(st.arrow) > 0 && got != want {
		return fmt.Errorf("%s: want %s, got %s", what, want, got)
	}
	return nil
}

// lease renders a Lease reply as "lease_offer J#n" or its code.
func (r *scRun) lease(deviceID string) (string, error) {
	rep, err := r.admin.Lease(r.ctx, r.clock.Now(), deviceID)
	if err != nil {
		return "", err
	}
	got := string(rep.Code)
	if rep.Code == protocol.CodeLeaseOffer {
		name := fmt.Sprintf("%s#%d", r.name(rep.JobID), rep.AttemptNumber)
		r.setName(rep.AttemptID, name)
		got += " " + name
	}
	r.tl.add(laneGateway, fmt.Sprintf("Lease for %s -> %s", r.name(deviceID), got))
	return got, nil
}

// cmdLeased awaits a `lease ... async` and checks its outcome.
// Example: leased l2 -> no_slot
func cmdLeased(r *scRun, st scStep) error { return r.outcome(st) }

// awaitLock waits until some transaction of the run's database waits on a
// lock, or the background operation name has finished without waiting
// (then the steps after it judge what it did).
func (r *scRun) awaitLock(name string) error {
	p, err := r.pendingOp(name)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(r.timeout)
	for {
		var waiting int
		if err := r.observer.QueryRow(r.ctx, `
SELECT count(*) FROM pg_stat_activity
WHERE datname = current_database() AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()`).Scan(&waiting); err != nil {
			return fmt.Errorf("await lock: %w", err)
		}
		switch {
		case waiting > 0:
			r.tl.add(laneDatabase, fmt.Sprintf("%s (%s) waits on a row lock", name, p.what))
			r.count("lock_waits", 1)
			return nil
		case p.finished():
			r.tl.add(laneDatabase, fmt.Sprintf("%s (%s) finished without waiting on a lock", name, p.what))
			return nil
		case time.Now().After(deadline):
			return fmt.Errorf("await lock: %s (%s) neither waits on a lock nor finished within %s", name, p.what, r.timeout)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
