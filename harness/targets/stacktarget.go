package targets

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"time"

	"github.com/rendermac/rendermac/harness/deviceclient"
	"github.com/rendermac/rendermac/harness/fuzz"
	"github.com/rendermac/rendermac/internal/clock"
	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/artifact"
	"github.com/rendermac/rendermac/server/fencing"
	"github.com/rendermac/rendermac/server/gateway"
	"github.com/rendermac/rendermac/server/grant"
	"github.com/rendermac/rendermac/server/store"
)

// StackTarget is the full stack as a fuzz.Target: buyers go through the
// HTTP API handler, devices through real WebSockets to in-process gateways
// (gateway.New over fencing.Service, served by httptest), each world device
// authenticated by its own device token, on a pinned stub clock that is
// moved to the runner's now before every operation, so the gateways' and
// the API's service calls decide at exactly the model's instants.
//
// Each device has two sessions, both said hello with slots_free 0:
//
//   - on the lease gateway, Lease is a slots{slots_free: 1} report, after
//     which the session leases once: the offer arrives as lease_offer. When
//     none follows, the end of the gateway's Lease transaction (txSignal)
//     says the attempt is over, and the reply code (no_job or no_slot, which
//     the wire never carries) is the service layer's answer to the same
//     Lease at the same instant on the unchanged rows, which is idempotent.
//   - on the frames gateway, progress, commit and fail frames, answered by
//     progress_ok / lease_conflict{reason}, commit_ok / commit_rejected{code},
//     fail_ok{requeued} / fail_rejected{code}. This session never offers
//     (see latch), because the gateway offers into every slot a result frees.
//
// Commits: a commit is one commit frame. Its commit_ok (or
// commit_rejected{verification_failed}) stands for commit_pending and then
// that result in the same step; every other commit_rejected code is
// transaction 1's (nothing runs between the two transactions of one step).
// The wire cannot express a transaction alone (commit_pending never goes on
// the wire), so an OpCommitBegin whose transaction 1 the model accepted,
// and every OpCommitFinish, run on the service layer (CommitBegin; Verify
// and CommitFinish). An OpCommitBegin the model refused is one frame too:
// refused at transaction 1, it is the same single transaction. CommitProbe
// tells the events apart, which fuzz.Target does not.
//
// Cancel, CreateJob: the API handler, called in-process. Sweep: the service
// layer (the gateways' sweep loops are off; the harness sweeps at its own
// instants). Withdraw: the service layer too, as a gateway calls it when an
// offer's write failed, which the wire cannot show. The frames gateway's LISTEN/NOTIFY listener runs and pushes
// cancel notices to the sessions.
//
// Normalizations, each deliberate and the only ones:
//
//  1. A frame with lease_epoch < 1 is refused by the strict decoder with
//     bad_message; it is mapped to the reply the contract's check order
//     gives it (badEpoch).
//  2. attempt_not_committable's attempt status is read from
//     commit_rejected's message: the wire has no field for it.
//  3. A Lease is a slots frame here, and the gateway heartbeats a device
//     on every slots report; the model's Lease heartbeats only past its
//     no_slot check. After a Lease answered no_slot or not_found, the
//     device's status and last_seen_at are put back as they were before
//     the frame. Progress, commit and fail frames are not normalized:
//     gateway and model heartbeat exactly the accepted ones.
//  4. The job input the API takes is real bytes (4 bytes whose SHA-256 is
//     the generator's), not the generator's declared size; inputs are not
//     projected, and equal requests still fingerprint equal.
type StackTarget struct {
	r       *stackResources
	marks   *StackMarks
	probe   *CommitProbe
	store   artifact.Store
	clock   *clock.Stub
	ids     *sharedIDs
	svc     *fencing.Service
	api     http.Handler
	signer  *grant.Signer
	apiKeys map[string]string // buyer id -> API key

	gwF, gwL       *gateway.Gateway
	srvF, srvL     *httptest.Server
	frames, leases map[string]*deviceclient.Client // by device id
	clients        []*deviceclient.Client
	stopRun        context.CancelFunc
	runDone        chan error
	pending        *wholeCommit
	begins         int         // CommitBegin calls so far, matched with the probe's
	scope          store.Scope // what store.Audit keeps between calls
}

// wholeCommit is the result of a commit frame whose transaction 1 said
// commit_pending, kept for the CommitFinish that follows in the same step.
type wholeCommit struct {
	jobID, attemptID string
	reply            protocol.Reply
}

// Name implements fuzz.Target.
func (t *StackTarget) Name() string { return "stack" }

// at moves the stub clock to now. The runner's time never goes back.
func (t *StackTarget) at(now time.Time) error {
	d := now.Sub(t.clock.Now())
	if d < 0 {
		return fmt.Errorf("stack clock at %s cannot go back to %s", t.clock.Now(), now)
	}
	t.clock.Advance(d)
	return nil
}

// begin starts an operation at now; a whole commit not finished in its own
// step is forgotten.
func (t *StackTarget) begin(now time.Time) error {
	t.pending = nil
	return t.at(now)
}

// Lease implements fuzz.Target over the device's lease session.
func (t *StackTarget) Lease(ctx context.Context, now time.Time, dev string) (protocol.Reply, error) {
	if err := t.begin(now); err != nil {
		return protocol.Reply{}, err
	}
	c := t.leases[dev]
	if c == nil {
		return protocol.Reply{}, fmt.Errorf("no lease session for device %s", dev)
	}
	before, err := t.liveness(ctx, dev)
	if err != nil {
		return protocol.Reply{}, err
	}
	tokens := t.ids.tokensDrawn()
	done := t.r.txL.arm()
	if err := t.send(ctx, c, &protocol.Slots{Type: protocol.TypeSlots, SlotsFree: 1}); err != nil {
		return protocol.Reply{}, err
	}
	if err := waitSignal(ctx, done, "the lease gateway's Lease"); err != nil {
		return protocol.Reply{}, err
	}
	if t.ids.tokensDrawn() == tokens {
		return t.noOffer(ctx, now, dev, before)
	}
	msg, err := t.next(ctx, c)
	if err != nil {
		return protocol.Reply{}, fmt.Errorf("lease offer for %s: %w", dev, err)
	}
	o, ok := msg.(*protocol.LeaseOffer)
	if !ok {
		return protocol.Reply{}, fmt.Errorf("lease for %s: expected lease_offer, got %T %+v", dev, msg, msg)
	}
	t.marks.WireOffers.Add(1)
	return protocol.Reply{Code: protocol.CodeLeaseOffer, JobID: o.JobID, AttemptID: o.AttemptID,
		AttemptNumber: o.AttemptNumber, LeaseEpoch: o.LeaseEpoch, CommitToken: o.CommitToken,
		LeaseExpiresAt: o.LeaseExpiresAt}, nil
}

// noOffer answers a Lease the gateway made no offer for: the same Lease on
// the service layer at the same instant, over rows nothing changed since,
// gives the code the wire does not carry (and writes what the gateway's
// attempt wrote already). An offer there means the gateway withheld one.
func (t *StackTarget) noOffer(ctx context.Context, now time.Time, dev string, before map[string]deviceLiveness) (protocol.Reply, error) {
	t.marks.NoOffers.Add(1)
	r, err := t.svc.Lease(ctx, now, dev)
	if err != nil {
		return r, err
	}
	switch r.Code {
	case protocol.CodeNoJob:
		return r, nil
	case protocol.CodeLeaseOffer:
		return r, fmt.Errorf("lease for %s: the gateway made no offer, but the service layer leases attempt %s", dev, r.AttemptID)
	}
	// no_slot and not_found do not heartbeat; the slots report did.
	return r, t.undoHeartbeat(ctx, before)
}

// Progress implements fuzz.Target with a progress frame.
func (t *StackTarget) Progress(ctx context.Context, now time.Time, dev string, p protocol.Progress) (protocol.Reply, error) {
	if err := t.begin(now); err != nil {
		return protocol.Reply{}, err
	}
	t.marks.Progress.Add(1)
	msg, err := t.roundTrip(ctx, dev, &p, p.JobID, p.AttemptID)
	if err != nil {
		return protocol.Reply{}, err
	}
	switch m := msg.(type) {
	case *protocol.ProgressOK:
		return protocol.Reply{Code: protocol.CodeProgressOK, JobID: m.JobID, AttemptID: m.AttemptID,
			LeaseExpiresAt: m.LeaseExpiresAt}, nil
	case *protocol.LeaseConflict:
		return protocol.Reply{Code: protocol.CodeLeaseConflict, Reason: m.Reason}, nil
	case *protocol.ErrorMessage:
		return t.badEpoch(m, p.LeaseEpoch, protocol.Reply{Code: protocol.CodeLeaseConflict, Reason: protocol.ReasonIdentityMismatch}), nil
	}
	return protocol.Reply{}, fmt.Errorf("progress: unexpected answer %T %+v", msg, msg)
}

// CommitBegin implements fuzz.Target: it uploads the attempt's synthetic
// output (as the agent would before committing), then sends the whole
// commit over the wire, or runs transaction 1 alone on the service layer
// for an OpCommitBegin (see StackTarget).
func (t *StackTarget) CommitBegin(ctx context.Context, now time.Time, dev string, c protocol.Commit, _ bool) (protocol.Reply, error) {
	if err := t.begin(now); err != nil {
		return protocol.Reply{}, err
	}
	if err := t.upload(ctx, c); err != nil {
		return protocol.Reply{}, err
	}
	t.begins++
	switch t.probe.kind(t.begins) {
	case commitUnknown:
		if t.probe != nil {
			return protocol.Reply{}, fmt.Errorf("commit probe out of step: the model has not run commit %d of this run first",
				t.begins)
		}
		fallthrough
	case commitBeginOnly:
		t.marks.SplitCommits.Add(1)
		return t.svc.CommitBegin(ctx, now, dev, c)
	}
	return t.wireCommit(ctx, dev, c)
}

func (t *StackTarget) wireCommit(ctx context.Context, dev string, c protocol.Commit) (protocol.Reply, error) {
	t.marks.WireCommits.Add(1)
	msg, err := t.roundTrip(ctx, dev, &c, c.JobID, c.AttemptID)
	if err != nil {
		return protocol.Reply{}, err
	}
	var final protocol.Reply
	switch m := msg.(type) {
	case *protocol.CommitOK:
		final = protocol.Reply{Code: protocol.CodeCommitOK}
	case *protocol.CommitRejected:
		final = protocol.Reply{Code: m.Code, Message: m.Message}
		if m.Code == protocol.CodeAttemptNotCommittable {
			if final.Status, err = notCommittableStatus(m.Message); err != nil {
				return protocol.Reply{}, err
			}
		}
	case *protocol.ErrorMessage:
		return t.badEpoch(m, c.LeaseEpoch, protocol.Reply{Code: protocol.CodeCommitConflict}), nil
	default:
		return protocol.Reply{}, fmt.Errorf("commit: unexpected answer %T %+v", msg, msg)
	}
	if final.Code != protocol.CodeCommitOK && final.Code != protocol.CodeVerificationFailed {
		// Every other rejection is transaction 1's: nothing runs between
		// the transactions of one step.
		return final, nil
	}
	t.pending = &wholeCommit{jobID: c.JobID, attemptID: c.AttemptID, reply: final}
	return protocol.Reply{Code: protocol.CodeCommitPending}, nil
}

func (t *StackTarget) upload(ctx context.Context, c protocol.Commit) error {
	return uploadHonest(ctx, t.svc, c)
}

// Upload implements fuzz.Target with a PUT through the HTTP API, with a
// grant for the attempt's output key as its offer carries.
func (t *StackTarget) Upload(ctx context.Context, now time.Time, job, att string) (protocol.Reply, error) {
	if err := t.begin(now); err != nil {
		return protocol.Reply{}, err
	}
	if !protocol.ValidID(job) || !protocol.ValidID(att) {
		return protocol.Reply{Code: protocol.CodeOutputSealed}, nil // no such key: the service layer's answer
	}
	u, err := url.Parse(t.signer.URL(grant.Put, protocol.OutputKey(job, att), now, time.Hour))
	if err != nil {
		return protocol.Reply{}, err
	}
	req := httptest.NewRequestWithContext(ctx, http.MethodPut, u.RequestURI(), bytes.NewReader(lateBytes(att)))
	rec := httptest.NewRecorder()
	t.api.ServeHTTP(rec, req)
	switch {
	case rec.Code == http.StatusOK:
		return protocol.Reply{Code: protocol.CodeUploadOK}, nil
	case rec.Code == http.StatusConflict && strings.Contains(rec.Body.String(), `"output_sealed"`):
		return protocol.Reply{Code: protocol.CodeOutputSealed}, nil
	}
	return protocol.Reply{}, fmt.Errorf("upload %s: HTTP %d: %s", att, rec.Code, rec.Body.String())
}

// CommitFinish implements fuzz.Target: the rest of this step's commit
// frame, or verification and transaction 2 on the service layer.
func (t *StackTarget) CommitFinish(ctx context.Context, now time.Time, job, att string) (protocol.Reply, error) {
	p := t.pending
	if err := t.begin(now); err != nil {
		return protocol.Reply{}, err
	}
	if p != nil && p.jobID == job && p.attemptID == att {
		return p.reply, nil
	}
	ok, err := t.svc.Verify(ctx, job, att)
	if err != nil {
		return protocol.Reply{}, err
	}
	return t.svc.CommitFinish(ctx, now, job, att, ok)
}

// Fail implements fuzz.Target with a fail frame.
func (t *StackTarget) Fail(ctx context.Context, now time.Time, dev string, f protocol.Fail) (protocol.Reply, error) {
	if err := t.begin(now); err != nil {
		return protocol.Reply{}, err
	}
	t.marks.Fails.Add(1)
	msg, err := t.roundTrip(ctx, dev, &f, f.JobID, f.AttemptID)
	if err != nil {
		return protocol.Reply{}, err
	}
	switch m := msg.(type) {
	case *protocol.FailOK:
		return protocol.Reply{Code: protocol.CodeFailOK, Requeued: m.Requeued}, nil
	case *protocol.FailRejected:
		return protocol.Reply{Code: m.Code}, nil
	case *protocol.ErrorMessage:
		mapped := protocol.Reply{Code: protocol.CodeFailConflict}
		if !f.FailureCode.Valid() {
			mapped.Code = protocol.CodeBadFailureCode
		}
		return t.badEpoch(m, f.LeaseEpoch, mapped), nil
	}
	return protocol.Reply{}, fmt.Errorf("fail: unexpected answer %T %+v", msg, msg)
}

// Withdraw implements fuzz.Target on the service layer: a gateway
// withdraws only an offer whose write failed, which the wire cannot show,
// so the stack runs the same call its gateways make (the scenarios
// offer_withdrawn_when_undelivered and device_close_withdraws_unanswered_offers
// drive the gateway's own withdrawals).
func (t *StackTarget) Withdraw(ctx context.Context, now time.Time, dev string, w protocol.Withdrawal) (protocol.Reply, error) {
	if err := t.begin(now); err != nil {
		return protocol.Reply{}, err
	}
	t.marks.Withdrawals.Add(1)
	return t.svc.Withdraw(ctx, now, dev, w)
}

// Sweep implements fuzz.Target on the service layer.
func (t *StackTarget) Sweep(ctx context.Context, now time.Time) (protocol.SweepResult, error) {
	if err := t.begin(now); err != nil {
		return protocol.SweepResult{}, err
	}
	return t.svc.Sweep(ctx, now)
}

// Prune implements fuzz.Target on the service layer, as `rendermac admin
// prune` and the server's retention run it.
func (t *StackTarget) Prune(ctx context.Context, now, olderThan time.Time) (protocol.PruneResult, error) {
	if err := t.begin(now); err != nil {
		return protocol.PruneResult{}, err
	}
	return prune(ctx, t.svc, olderThan)
}

// Snapshot implements fuzz.Target.
func (t *StackTarget) Snapshot(ctx context.Context) (protocol.Snapshot, error) {
	return store.Snapshot(ctx, t.r.pool)
}

// Audit implements fuzz.Auditor over the stack's database and store.
func (t *StackTarget) Audit(ctx context.Context, scope *fuzz.RowScope) ([]string, protocol.Snapshot, bool, error) {
	return auditAll(ctx, t.r.pool, t.store, &t.scope, scope)
}

// CheckInvariants implements fuzz.Target with the SQL checks of store.
func (t *StackTarget) CheckInvariants(ctx context.Context) ([]string, error) {
	return checkAll(ctx, t.r.pool, t.store)
}
