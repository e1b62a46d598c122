package gateway

import (
	"context"
	"maps"
	"slices"
	"strings"

	"github.com/coder/websocket"

	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/faultpoint"
	"github.com/rendermac/rendermac/server/fencing"
	"github.com/rendermac/rendermac/server/grant"
)

// wakeOffer asks for an offer pass, leasing into the session's free
// slots: on welcome, a slots report, a result that freed a slot, a jobs
// notification or the poll. The pass runs in a goroutine of its own that
// ends when nothing is left to do, so an idle session has no offerer
// waiting. A wake while a pass runs makes it go round once more, as a
// level-triggered flag would. A session with no slot to lease into now
// and no promise to pass on is not woken at all: a pass could do nothing.
// An ended session passes its promises on in serve.
func (s *session) wakeOffer() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.wakeOfferLocked()
}

func (s *session) wakeOfferLocked() {
	switch {
	case s.offerRunning:
		s.offerAgain = true
	case s.promised == 0 && !s.claimableLocked():
	case s.spawnLocked(s.offerPasses):
		s.offerRunning = true
	}
}

// offerPasses runs offer passes until no wake came during the last one.
func (s *session) offerPasses() {
	for {
		s.g.wakes.offers.Add(1)
		s.offerPass()
		s.mu.Lock()
		again := s.offerAgain
		s.offerAgain, s.offerRunning = false, again
		s.mu.Unlock()
		if !again {
			return
		}
	}
}

// offerPass leases into free slots until one lease makes no offer.
func (s *session) offerPass() {
	// Every promise taken here was made after its job committed, so the
	// Leases below see that job unless another device took it.
	promised := s.takePromised()
	offers := 0
	for {
		res := s.offerOne()
		if res == offerSent {
			offers++
			continue
		}
		if res == offerStuck && offers < promised {
			// Jobs this session was woken for alone may still be queued.
			s.g.wakeService("")
		}
		return
	}
}

// The outcomes of offerOne.
const (
	offerSent  = iota // an offer went out; more slots may be free
	offerNoJob        // nothing leasable for the device now
	offerStuck        // no lease was made for another reason
)

// offerOne leases one attempt into a free slot and sends the offer. It
// reports offerSent when to try again at once; otherwise the loop waits
// for the next wake.
func (s *session) offerOne() int {
	if !s.claim() {
		return offerStuck
	}
	defer s.inflight.Done()
	gen := s.g.queues.now() // before the Lease: see emptyQueues
	s.mu.Lock()
	services := s.services
	s.mu.Unlock()
	if s.g.queues.known(services) {
		s.unclaim(1)
		s.g.m.LeasesSkipped.Inc()
		return offerNoJob
	}
	at := s.g.cfg.Clock.Now()
	r, job, err := s.g.svc.LeaseJob(s.g.ctx, s.g.now(), s.deviceID)
	if err != nil {
		s.unclaim(1)
		if s.g.ctx.Err() == nil {
			s.log.Warn("lease", "err", err)
		}
		return offerStuck
	}
	switch r.Code {
	case protocol.CodeLeaseOffer:
		s.touched(at) // the lease heartbeat the device
		if s.deliver(r, job) {
			return offerSent
		}
	case protocol.CodeNoJob:
		s.touched(at) // so did a lease that found no job
		s.g.queues.found(job.Searched, gen)
		s.unclaim(1)
		return offerNoJob
	case protocol.CodeNoSlot:
		// The database counts the device's live attempts, and some may not
		// be this session's to end (an attempt of a crashed agent process,
		// which only the sweeper frees). Keep the agent's own count and ask
		// again at the next wake (jobs notice, poll): zeroing it here would
		// starve the session forever, since the agent's free count does
		// not change and it sends no new slots report.
		s.unclaim(1)
	case protocol.CodeNotFound:
		s.mu.Lock()
		s.revoked, s.offering = true, s.offering-1
		s.mu.Unlock()
		s.log.Warn("device revoked; no more offers on this session")
	default:
		s.unclaim(1)
		s.log.Error("lease: unexpected reply", "code", r.Code)
	}
	return offerStuck
}

// promise takes one free slot of the session, not promised before, for a
// job of service that wakeForJob wakes this session alone for.
func (s *session) promise(service string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closedToOffersLocked() || s.slotsFree-s.promised <= 0 ||
		!slices.Contains(s.services, service) {
		return false
	}
	s.promised++
	return true
}

// takePromised returns and clears the session's promises.
func (s *session) takePromised() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.promised
	s.promised = 0
	return n
}

// claim takes a free slot for an offer about to be made.
func (s *session) claim() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.claimableLocked() {
		return false
	}
	s.slotsFree--
	s.offering++
	s.inflight.Add(1)
	return true
}

// claimableLocked reports whether claim would take a slot now.
func (s *session) claimableLocked() bool {
	return !s.closedToOffersLocked() && s.slotsFree > 0 && s.ctx.Err() == nil
}

// closedToOffersLocked reports whether the session takes no offer at all:
// not welcomed yet, drained by the gateway (superseded, shutting down),
// its device drained by an operator, revoked, or ended.
func (s *session) closedToOffersLocked() bool {
	return !s.welcomed || s.draining || s.deviceDrained || s.revoked || s.ended
}

// unclaim ends a claim; free is how many slots it gives back (0 or 1).
func (s *session) unclaim(free int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.offering--
	s.slotsFree = min(s.slotsFree+free, s.slotsTotal)
}

// deliver sends a leased attempt. An offer that cannot be built or sent
// never reached the device, so it is withdrawn at once (the token is still
// in hand): the job is queued again now, with none of its budget spent,
// instead of when the lease would expire (SPEC section 5).
func (s *session) deliver(r protocol.Reply, job fencing.OfferJob) bool {
	offer, err := s.g.buildOffer(s.ctx, r, job)
	if err != nil {
		// No grant, no offer: the job goes back to the queue now.
		s.log.Error("lease offer without grants", "job_id", r.JobID, "attempt_id", r.AttemptID, "err", err)
		s.unclaim(0)
		s.withdraw(r, "its grants could not be made")
		return false
	}
	s.waitLostFrames()
	// The claim ends before the write, not after: a slots report the
	// device sends once it has the offer already counts it, and one read
	// while the claim still stood would count it a second time (no lease
	// for that slot until the next wake). A report sent before the device
	// had the offer and read after this is one slot too many at most,
	// which Lease's own count of live attempts refuses (no_slot).
	s.offered(r)
	s.unclaim(0)
	sent := s.write(offer)
	s.g.svc.FaultPoints().Hit(s.g.ctx, faultpoint.GatewayAfterOfferWrite)
	if s.g.v.sessionFenced() {
		s.g.offeredOn.Store(r.AttemptID, s)
	}
	if !sent {
		s.heard(r.AttemptID)
		s.withdraw(r, "its write failed")
		return false
	}
	s.g.m.Leases.Inc()
	s.log.Info("lease offered", "job_id", r.JobID, "attempt_id", r.AttemptID, "attempt_number", r.AttemptNumber)
	return true
}

// withdraw takes back an offer the device never had (fencing's Withdraw):
// its attempt spends none of the job's budget and the job is queued again.
// why says how the gateway knows; a refusal (the device acted on the offer
// after all, or the attempt ended meanwhile) changes nothing.
func (s *session) withdraw(r protocol.Reply, why string) {
	w := protocol.Withdrawal{JobID: r.JobID, AttemptID: r.AttemptID, LeaseEpoch: r.LeaseEpoch, CommitToken: r.CommitToken}
	res, err := s.g.svc.Withdraw(s.g.ctx, s.g.now(), s.deviceID, w)
	if err != nil {
		s.log.Warn("withdraw undelivered offer; the sweeper will reclaim it", "job_id", r.JobID,
			"attempt_id", r.AttemptID, "why", why, "err", err)
		return
	}
	s.g.m.Withdrawals.WithLabelValues(string(res.Code)).Inc()
	if res.Code != protocol.CodeWithdrawn {
		s.log.Info("offer not withdrawn: the device acted on it, or its attempt is over", "job_id", r.JobID,
			"attempt_id", r.AttemptID, "why", why, "code", res.Code)
		return
	}
	s.log.Info("withdrew undelivered offer", "job_id", r.JobID, "attempt_id", r.AttemptID, "why", why,
		"requeued", res.Requeued)
	if res.Requeued {
		s.g.jobsAvailable("")
	}
}

// offered records an offer about to be written as unheard: no frame of
// this session has named its attempt yet (withdrawUnheard).
func (s *session) offered(r protocol.Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unheard[r.AttemptID] = r
}

// heard forgets an offer the device has spoken of on this session (a
// phase, a commit, a fail), or that was withdrawn already.
func (s *session) heard(attemptID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.unheard, attemptID)
}

// withdrawUnheard withdraws, once the session has ended, every offer
// written on it that no frame of it has named, when the device itself
// closed it normally (SPEC section 5): a device that says goodbye acts on
// nothing more sent on this session. Withdraw's fence leaves any offer the
// device did act on, on another session, to it. A session the gateway
// closed (superseded, drained) or that dropped keeps its offers: the
// device may come back for them, and the sweeper ends those it does not.
func (s *session) withdrawUnheard(closedBy websocket.StatusCode) {
	s.mu.Lock()
	keep := s.draining || closedBy != websocket.StatusNormalClosure
	unheard := slices.SortedFunc(maps.Values(s.unheard), func(a, b protocol.Reply) int {
		return strings.Compare(a.AttemptID, b.AttemptID)
	})
	clear(s.unheard)
	s.mu.Unlock()
	if keep || s.g.ctx.Err() != nil {
		return
	}
	for _, r := range unheard {
		s.withdraw(r, "the device closed its session without answering it")
	}
}

// buildOffer turns a lease_offer reply into the wire frame: the job's
// service, params and input as the lease's pick read them (no read of its
// own), and grants scoped to the job's input key (get) and the attempt's
// output key (put). Grants are issued at the lease's own instant (the
// database's clock, through the reply), not at this process's clock.
func (g *Gateway) buildOffer(ctx context.Context, r protocol.Reply, job fencing.OfferJob) (*protocol.LeaseOffer, error) {
	o := &protocol.LeaseOffer{Type: protocol.TypeLeaseOffer, JobID: r.JobID, AttemptID: r.AttemptID,
		AttemptNumber: r.AttemptNumber, LeaseEpoch: r.LeaseEpoch, CommitToken: r.CommitToken,
		LeaseExpiresAt: r.LeaseExpiresAt, Service: job.Service, Params: job.Params}
	o.Input.Bytes, o.Input.SHA256 = job.InputBytes, job.InputSHA256
	if o.Params == nil {
		o.Params = map[string]string{}
	}
	issued := r.LeaseExpiresAt.Add(-g.cfg.LeaseTTL)
	var err error
	if o.Input.URL, err = g.cfg.Grants.Grant(ctx, grant.Get, protocol.InputKey(r.JobID), issued, g.cfg.GrantTTL); err != nil {
		return nil, err
	}
	o.Output.Key = protocol.OutputKey(r.JobID, r.AttemptID)
	if o.Output.UploadURL, err = g.cfg.Grants.Grant(ctx, grant.Put, o.Output.Key, issued, g.cfg.GrantTTL); err != nil {
		return nil, err
	}
	return o, nil
}
