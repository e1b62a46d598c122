package model

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"pgregory.net/rapid"

	"github.com/rendermac/rendermac/protocol"
)

// chooser draws the machine's decisions: rapid in the property test (so
// failures shrink), a seeded PRNG in the walks that must be reproducible.
type chooser interface {
	intn(label string, n int) int
}

type rapidChooser struct{ t *rapid.T }

func (c rapidChooser) intn(label string, n int) int { return rapid.IntRange(0, n-1).Draw(c.t, label) }

type prngChooser struct{ r *rand.Rand }

func (c prngChooser) intn(_ string, n int) int { return c.r.IntN(n) }

// Perturbations of an agent frame.
const (
	honest = iota
	foreignDevice
	wrongEpoch
	wrongToken
	staleToken // the token of another (usually earlier) attempt
	perturbations
)

var (
	machineDevices = []string{"dev-a", "dev-b", "dev-c"}
	leaseDevices   = []string{"dev-a", "dev-b", "dev-c", "dev-unknown"}
)

// machine drives a model through random actions with perturbations. In
// strict mode it also checks the replies the perturbations must get; in
// loose mode (for mutated models) only the invariants are checked, so a
// caught variant is the checker's doing.
type machine struct {
	m      *ExecutionModel
	now    time.Time
	strict bool
	jobs   []string
	owner  map[string]string
	offers []protocol.Reply
	dev    map[string]string // attempt id -> device it was offered to
	codes  map[protocol.Code]int
	err    error
	// violations are the last non-empty CheckInvariants result.
	violations []protocol.Violation
}

func newMachine(mut Variant, seed uint64, strict bool) *machine {
	m := New(Config{Variant: mut}, seededIDs(seed))
	m.AddBuyer(buyerRich, 1_000_000)
	m.AddBuyer(buyerPoor, 25)
	m.AddDevice("dev-a", []string{svcSynthetic, svc720p}, 2)
	m.AddDevice("dev-b", []string{svcSynthetic}, 1)
	m.AddDevice("dev-c", []string{svc720p}, 1)
	return &machine{m: m, now: t0, strict: strict, owner: map[string]string{}, dev: map[string]string{},
		codes: map[protocol.Code]int{}}
}

// expect records a reply and, in strict mode, checks it is one of want.
func (mc *machine) expect(op string, r protocol.Reply, want ...protocol.Code) {
	mc.codes[r.Code]++
	if mc.strict && mc.err == nil && !slices.Contains(want, r.Code) {
		mc.err = fmt.Errorf("%s: got %+v, want one of %v", op, r, want)
	}
}

// actionWeights biases the walk towards the steps that move an attempt
// forward, so that runs reach commits and cancellations between the
// transactions instead of drowning in expired leases.
var actionWeights = map[string]int{"create": 2, "lease": 2, "progress": 4, "commitBegin": 3, "commitFinish": 2,
	"fail": 1, "withdraw": 1, "cancel": 1, "tick": 2, "sweep": 1, "revoke": 1}

// actions returns the machine's actions by name, each repeated by its
// weight ("progress#2"), for rapid's Repeat and the PRNG walk alike.
func (mc *machine) actions() map[string]func(chooser) {
	base := map[string]func(chooser){
		"create":      mc.create,
		"lease":       mc.lease,
		"progress":    mc.progress,
		"commitBegin": mc.commitBegin,
		"commitFinish": func(c chooser) {
			if o, ok := mc.pickOffer(c); ok {
				mc.expect("commitFinish", mc.m.CommitFinish(mc.now, o.JobID, o.AttemptID), protocol.CodeCommitOK,
					protocol.CodeVerificationFailed, protocol.CodeJobCancelled, protocol.CodeAttemptNotCommittable)
			}
		},
		"fail":     mc.fail,
		"withdraw": mc.withdraw,
		"cancel":   mc.cancel,
		"tick": func(c chooser) {
			steps := []time.Duration{time.Second, time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second,
				31 * time.Second, 2 * time.Minute}
			mc.now = mc.now.Add(steps[c.intn("tick", len(steps))])
		},
		"sweep":  func(chooser) { mc.m.Sweep(mc.now) },
		"revoke": func(chooser) { mc.m.RevokeDevice("dev-c") },
	}
	out := make(map[string]func(chooser))
	for name, act := range base {
		for i := range actionWeights[name] {
			out[fmt.Sprintf("%s#%d", name, i)] = act
		}
	}
	return out
}

func (mc *machine) create(c chooser) {
	buyer := []string{buyerRich, buyerRich, buyerPoor}[c.intn("buyer", 3)]
	req := request(buyer, []string{svcSynthetic, svcSynthetic, svc720p, "bogus"}[c.intn("service", 4)])
	req.MaxAttempts = c.intn("max_attempts", 4) // 0 is a validation error
	req.AdmissionWindow = []time.Duration{45 * time.Second, 2 * time.Minute, time.Hour, time.Hour}[c.intn("window", 4)]
	req.IdempotencyKey = []string{"", "", "k1", "k2"}[c.intn("key", 4)]
	r := mc.m.CreateJob(mc.now, req)
	mc.expect("create", r, protocol.CodeCreated, protocol.CodeValidation, protocol.CodeInsufficientFunds,
		protocol.CodeIdempotencyConflict)
	if r.Code == protocol.CodeCreated && !r.Existing {
		mc.jobs = append(mc.jobs, r.JobID)
		mc.owner[r.JobID] = buyer
	}
}

func (mc *machine) lease(c chooser) {
	dev := leaseDevices[c.intn("device", len(leaseDevices))]
	r := mc.m.Lease(mc.now, dev)
	mc.expect("lease", r, protocol.CodeLeaseOffer, protocol.CodeNoJob, protocol.CodeNoSlot, protocol.CodeNotFound)
	if r.Code == protocol.CodeLeaseOffer {
		mc.offers = append(mc.offers, r)
		mc.dev[r.AttemptID] = dev
	}
}

// pickOffer picks, three times in four, an offer whose attempt is still the
// job's live attempt (so the walk gets somewhere), else any offer ever made.
func (mc *machine) pickOffer(c chooser) (protocol.Reply, bool) {
	if len(mc.offers) == 0 {
		return protocol.Reply{}, false
	}
	if c.intn("stale", 4) < 3 {
		var live []protocol.Reply
		for _, o := range mc.offers {
			if a, ok := mc.m.LiveAttempt(o.JobID); ok && a.ID == o.AttemptID {
				live = append(live, o)
			}
		}
		if len(live) > 0 {
			return live[c.intn("live", len(live))], true
		}
	}
	return mc.offers[c.intn("offer", len(mc.offers))], true
}

// perturb returns the device and identities an agent frame carries.
func (mc *machine) perturb(c chooser, o protocol.Reply) (p int, dev string, epoch int, token string) {
	p, dev, epoch, token = c.intn("perturb", perturbations*2), mc.dev[o.AttemptID], o.LeaseEpoch, o.CommitToken
	switch p {
	case foreignDevice:
		for _, d := range machineDevices {
			if d != dev {
				dev = d
				break
			}
		}
	case wrongEpoch:
		epoch += 1 + c.intn("epoch", 2)
	case wrongToken:
		token = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	case staleToken:
		other := mc.offers[c.intn("other", len(mc.offers))]
		if other.AttemptID == o.AttemptID {
			return honest, dev, epoch, token
		}
		token = other.CommitToken
	default:
		p = honest // half the frames are honest
	}
	return p, dev, epoch, token
}

func (mc *machine) progress(c chooser) {
	o, ok := mc.pickOffer(c)
	if !ok {
		return
	}
	p, dev, epoch, _ := mc.perturb(c, o)
	// A third straight to uploading, a third the next phase, a third any
	// phase (including committing, which is never a valid report).
	phase := protocol.AttemptStatuses[c.intn("phase", 5)]
	switch c.intn("advance", 3) {
	case 0:
		phase = protocol.AttemptUploading
	case 1:
		if a, ok := mc.m.LiveAttempt(o.JobID); ok && protocol.PhaseRank(a.Status) > 0 {
			phase = protocol.AttemptStatuses[min(protocol.PhaseRank(a.Status), 3)]
		}
	}
	r := mc.m.Progress(mc.now, dev, protocol.Progress{JobID: o.JobID, AttemptID: o.AttemptID, LeaseEpoch: epoch,
		Phase: phase})
	if p == foreignDevice || p == wrongEpoch {
		mc.expect("progress (perturbed)", r, protocol.CodeLeaseConflict)
		if mc.strict && mc.err == nil && r.Reason != protocol.ReasonIdentityMismatch {
			mc.err = fmt.Errorf("perturbed progress: got reason %s", r.Reason)
		}
		return
	}
	mc.expect("progress", r, protocol.CodeProgressOK, protocol.CodeLeaseConflict)
}

func (mc *machine) commitBegin(c chooser) {
	o, ok := mc.pickOffer(c)
	if !ok {
		return
	}
	p, dev, epoch, token := mc.perturb(c, o)
	cm := commitOf(o)
	cm.LeaseEpoch, cm.CommitToken = epoch, token
	outputOK := c.intn("outputOK", 4) > 0
	var r protocol.Reply
	if c.intn("both", 2) == 0 {
		r = mc.m.Commit(mc.now, dev, cm, outputOK)
	} else {
		r = mc.m.CommitBegin(mc.now, dev, cm, outputOK)
	}
	if p != honest {
		mc.expect("commit (perturbed)", r, protocol.CodeCommitConflict)
		return
	}
	mc.expect("commit", r, protocol.CodeCommitPending, protocol.CodeCommitOK, protocol.CodeVerificationFailed,
		protocol.CodeJobCancelled, protocol.CodeAttemptNotCommittable, protocol.CodeLeaseExpired)
}

func (mc *machine) fail(c chooser) {
	o, ok := mc.pickOffer(c)
	if !ok {
		return
	}
	p, dev, epoch, token := mc.perturb(c, o)
	codes := append(slices.Clone(protocol.FailureCodes), "bogus")
	code := codes[c.intn("code", len(codes))]
	r := mc.m.Fail(mc.now, dev, protocol.Fail{JobID: o.JobID, AttemptID: o.AttemptID, LeaseEpoch: epoch,
		CommitToken: token, FailureCode: code})
	switch {
	case !code.Valid():
		mc.expect("fail (bad code)", r, protocol.CodeBadFailureCode)
	case p != honest:
		mc.expect("fail (perturbed)", r, protocol.CodeFailConflict)
	default:
		mc.expect("fail", r, protocol.CodeFailOK, protocol.CodeFailConflict)
	}
}

// withdraw is the gateway taking back an offer it could not deliver: it
// may come after the device acted on it, or perturbed, and is then refused.
func (mc *machine) withdraw(c chooser) {
	o, ok := mc.pickOffer(c)
	if !ok {
		return
	}
	p, dev, epoch, token := mc.perturb(c, o)
	r := mc.m.Withdraw(mc.now, dev, protocol.Withdrawal{JobID: o.JobID, AttemptID: o.AttemptID, LeaseEpoch: epoch,
		CommitToken: token})
	if p != honest {
		mc.expect("withdraw (perturbed)", r, protocol.CodeWithdrawConflict)
		return
	}
	mc.expect("withdraw", r, protocol.CodeWithdrawn, protocol.CodeWithdrawConflict)
}

func (mc *machine) cancel(c chooser) {
	if len(mc.jobs) == 0 {
		return
	}
	id := mc.jobs[c.intn("job", len(mc.jobs))]
	if c.intn("buyer", 4) == 0 {
		mc.expect("cancel (other buyer)", mc.m.Cancel(mc.now, "buyer-other", id), protocol.CodeNotFound)
		return
	}
	mc.expect("cancel", mc.m.Cancel(mc.now, mc.owner[id], id), protocol.CodeCancelled, protocol.CodeCancelling,
		protocol.CodeJobTerminal)
}

// check is run after every action: the model's invariants, and in strict
// mode the replies and the independent snapshot check.
func (mc *machine) check() error {
	if mc.err != nil {
		return mc.err
	}
	if v := mc.m.CheckInvariants(); len(v) > 0 {
		mc.violations = v
		return fmt.Errorf("violations: %v", v)
	}
	if mc.strict {
		if v := snapshotViolations(mc.m.Snapshot(), mc.m.credits()); len(v) > 0 {
			return fmt.Errorf("snapshot violations: %v", v)
		}
	}
	return nil
}
