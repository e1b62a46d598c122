package fuzz

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/rendermac/rendermac/protocol"
)

// Coverage counts what a run or a campaign reached: job and attempt status
// transitions (keys "from->to" with the statuses of SPEC section 2), reply
// codes (a lease_conflict is keyed with its reason, "lease_conflict/phase_regression"),
// fault kinds (the perturbations of SPEC section 7, "stale_token") and the
// phase each fenced fault hit ("stale_token@committing"). Every field is a
// plain count map, so that the coverage of a campaign split in shards is the
// sum of the shards' coverage.
type Coverage struct {
	JobTransitions     map[string]int64
	AttemptTransitions map[string]int64
	Replies            map[string]int64
	Faults             map[string]int64
	FaultPhases        map[string]int64
}

// NewCoverage returns an empty coverage with every map allocated.
func NewCoverage() Coverage {
	return Coverage{JobTransitions: map[string]int64{}, AttemptTransitions: map[string]int64{},
		Replies: map[string]int64{}, Faults: map[string]int64{}, FaultPhases: map[string]int64{}}
}

// Add sums o into c.
func (c *Coverage) Add(o Coverage) {
	add := func(dst *map[string]int64, src map[string]int64) {
		if *dst == nil {
			*dst = map[string]int64{}
		}
		for k, n := range src {
			(*dst)[k] += n
		}
	}
	add(&c.JobTransitions, o.JobTransitions)
	add(&c.AttemptTransitions, o.AttemptTransitions)
	add(&c.Replies, o.Replies)
	add(&c.Faults, o.Faults)
	add(&c.FaultPhases, o.FaultPhases)
}

// Fault kinds a run can count. Those of fenced frames (progress, commit,
// fail, commit_finish, upload) are also counted per phase of the attempt
// they hit.
const (
	FaultStaleAttempt     = "stale_attempt"     // a frame names an older attempt of the job
	FaultForeignDevice    = "foreign_device"    // a fenced frame from another device than the owner
	FaultWrongEpoch       = "wrong_epoch"       // lease_epoch off by one either way
	FaultWrongToken       = "wrong_token"       // a random commit token
	FaultStaleToken       = "stale_token"       // the previous attempt's commit token
	FaultBadOutput        = "bad_output"        // a claimed sha256 the stored bytes do not have
	FaultBadFailureCode   = "bad_failure_code"  // a fail with a code agents may not send
	FaultForeignBuyer     = "foreign_buyer"     // a cancel by another buyer than the job's
	FaultClockJump        = "clock_jump"        // a tick of a minute or more
	FaultUnknownService   = "unknown_service"   // a create for a service no device offers
	FaultBadMaxAttempts   = "bad_max_attempts"  // max_attempts outside 1..10
	FaultUnstorableParams = "unstorable_params" // params Postgres cannot store (NUL, invalid UTF-8)
	FaultDuplicate        = "duplicate"         // the previous frame sent again
	FaultReorder          = "reorder"           // a frame delivered after the one drawn after it
	// The pause rule's outcomes (SPEC section 3, "Pausing a service"),
	// counted with the faults although an operator's pause is no fault.
	FaultPausedLease  = "paused_lease"  // a lease whose device would have been offered a job of a paused service
	FaultPausedExpiry = "paused_expiry" // a sweep that fails a paused service's queued job at its deadline
)

// Pauses is implemented by a reference target (the model) that can say
// whether the pause rule decides the next lease or sweep; the runner asks
// the first target, before the step, to count FaultPausedLease and
// FaultPausedExpiry.
type Pauses interface {
	PausedBlocks(now time.Time, deviceID string) bool
	PausedExpires(now time.Time) bool
}

// PausedBlocks implements Pauses.
func (t *ModelTarget) PausedBlocks(now time.Time, deviceID string) bool {
	return t.M.PausedBlocks(now, deviceID)
}

// PausedExpires implements Pauses.
func (t *ModelTarget) PausedExpires(now time.Time) bool { return t.M.PausedExpires(now) }

// Phases a fenced fault is counted at, besides the attempt statuses
// leased..committing: the targeted attempt had ended, or there was none.
const (
	PhaseEnded = "ended"
	PhaseNone  = "none"
)

// Tables are the state machines coverage is shown against: statuses in
// table order and every transition SPEC section 2's tables allow.
type Tables struct {
	JobStatuses, AttemptStatuses, JobTransitions, AttemptTransitions []string
}

// TransitionTables returns the protocol's tables as coverage keys.
func TransitionTables() Tables {
	var t Tables
	for _, from := range protocol.JobStatuses {
		t.JobStatuses = append(t.JobStatuses, string(from))
		for _, to := range protocol.JobStatuses {
			if protocol.AssertJobTransition(from, to) == nil {
				t.JobTransitions = append(t.JobTransitions, string(from)+"->"+string(to))
			}
		}
	}
	for _, from := range protocol.AttemptStatuses {
		t.AttemptStatuses = append(t.AttemptStatuses, string(from))
		for _, to := range protocol.AttemptStatuses {
			if protocol.AssertAttemptTransition(from, to) == nil {
				t.AttemptTransitions = append(t.AttemptTransitions, string(from)+"->"+string(to))
			}
		}
	}
	return t
}

// FaultPhaseNames lists the phases a fenced fault is counted at, in order.
func FaultPhaseNames() []string {
	out := make([]string, 0, len(phases)+3)
	for _, p := range phases {
		out = append(out, string(p))
	}
	return append(out, string(protocol.AttemptCommitting), PhaseEnded, PhaseNone)
}

// LiveAttempts is implemented by a reference target (the model) that can say
// cheaply which attempt of a job is live. The runner asks the first target:
// it orders the jobs events aim at (jobs with a live attempt first) and
// names the phase a fault hit. Its answers are the same as every other
// target's would be, because their replies and rows are compared.
type LiveAttempts interface {
	LiveAttempt(jobID string) (protocol.AttemptRow, bool)
}

// LiveAttempt implements LiveAttempts.
func (t *ModelTarget) LiveAttempt(jobID string) (protocol.AttemptRow, bool) {
	return t.M.LiveAttempt(jobID)
}

// replyKey is a reply's coverage key: its code, and a lease_conflict's reason.
func replyKey(r protocol.Reply) string {
	if r.Reason != "" {
		return string(r.Code) + "/" + string(r.Reason)
	}
	return string(r.Code)
}

// countTransitions adds the journal's status changes (creation rows, which
// have no from, are not transitions).
func (c *Coverage) countTransitions(journal []protocol.EventRow) {
	for _, e := range journal {
		if e.From == "" {
			continue
		}
		key := e.From + "->" + e.To
		if e.Kind == "job" {
			c.JobTransitions[key]++
		} else {
			c.AttemptTransitions[key]++
		}
	}
}

// transitionsOf records the reference target's journal into c.
func transitionsOf(ctx context.Context, t Target, c *Coverage) error {
	snap, err := t.Snapshot(ctx)
	if err != nil {
		return fmt.Errorf("coverage snapshot of %s: %w", t.Name(), err)
	}
	c.countTransitions(snap.Journal)
	return nil
}

// countFaults adds the faults ev carries, resolved against the view before
// the step is applied (a stale token is only stale if the job had an older
// attempt), and the phase of the attempt each fenced fault hit.
func (r *runner) countFaults(ev Event, c *Coverage) {
	var kinds []string
	fenced := false
	switch ev.Op {
	case OpCreate:
		if ev.Service == unknownService {
			kinds = append(kinds, FaultUnknownService)
		}
		if ev.MaxAttempts < protocol.MaxAttemptsMin || ev.MaxAttempts > protocol.MaxAttemptsMax {
			kinds = append(kinds, FaultBadMaxAttempts)
		}
		if ev.Param >= paramNUL {
			kinds = append(kinds, FaultUnstorableParams)
		}
	case OpLease:
		if p, ok := r.targets[0].(Pauses); ok && p.PausedBlocks(r.v.now, WorldDevices[ev.Device%len(WorldDevices)].ID) {
			kinds = append(kinds, FaultPausedLease)
		}
	case OpSweep:
		if p, ok := r.targets[0].(Pauses); ok && p.PausedExpires(r.v.now) {
			kinds = append(kinds, FaultPausedExpiry)
		}
	case OpTick:
		if ev.Advance >= clockJump {
			kinds = append(kinds, FaultClockJump)
		}
	case OpBoundary:
		if r.landed != "" {
			kinds = append(kinds, r.landed)
		}
	case OpCancel:
		if j := r.v.job(ev.Job); j != nil && ev.Buyer >= 0 && WorldBuyers[ev.Buyer%len(WorldBuyers)].ID != j.buyer {
			kinds = append(kinds, FaultForeignBuyer)
		}
	case OpProgress, OpCommit, OpCommitBegin, OpFail, OpCommitFinish, OpUpload, OpWithdraw:
		fenced = true
		kinds = r.fenceFaults(ev)
		if (ev.Op == OpCommit || ev.Op == OpCommitBegin) && !ev.OutputOK {
			kinds = append(kinds, FaultBadOutput)
		}
		if ev.Op == OpFail && !ev.Code.Valid() {
			kinds = append(kinds, FaultBadFailureCode)
		}
	}
	if len(kinds) == 0 {
		return
	}
	phase := ""
	if fenced {
		phase = r.targetPhase(ev)
	}
	for _, k := range kinds {
		c.Faults[k]++
		if phase != "" {
			c.FaultPhases[k+"@"+phase]++
		}
	}
}

// fenceFaults lists the identity perturbations ev carries against the job
// it resolves to; a perturbation that resolves to the right identity (a
// "foreign" device that is the owner) is not counted.
func (r *runner) fenceFaults(ev Event) []string {
	j := r.v.job(ev.Job)
	if j == nil || len(j.attempts) == 0 {
		return nil
	}
	idx := max(len(j.attempts)-1-ev.Attempt, 0)
	var kinds []string
	if idx < len(j.attempts)-1 {
		kinds = append(kinds, FaultStaleAttempt)
	}
	if ev.Op == OpCommitFinish || ev.Op == OpUpload {
		return kinds // these name the attempt only
	}
	if ev.Device >= 0 && WorldDevices[ev.Device%len(WorldDevices)].ID != j.attempts[idx].device {
		kinds = append(kinds, FaultForeignDevice)
	}
	if ev.Epoch != 0 {
		kinds = append(kinds, FaultWrongEpoch)
	}
	if ev.Op != OpProgress { // progress presents no token
		switch {
		case ev.Token == TokenWrong, ev.Token == TokenStale && idx == 0:
			kinds = append(kinds, FaultWrongToken)
		case ev.Token == TokenStale:
			kinds = append(kinds, FaultStaleToken)
		}
	}
	return kinds
}

// targetPhase is the status of the attempt ev aims at before the step: a
// lease phase or committing while it is live, PhaseEnded after, PhaseNone
// when the job has no attempt (or there is no job).
func (r *runner) targetPhase(ev Event) string {
	j := r.v.job(ev.Job)
	if j == nil || len(j.attempts) == 0 {
		return PhaseNone
	}
	a := j.attempts[max(len(j.attempts)-1-ev.Attempt, 0)]
	if r.live == nil {
		return PhaseEnded
	}
	if row, ok := r.live.LiveAttempt(j.id); ok && row.ID == a.id {
		return string(row.Status)
	}
	return PhaseEnded
}

// Required lists what every campaign must reach, or qualification fails:
// the coverage gate's "sometimes" assertions. A campaign that never reached
// one of these checked nothing about it, however many steps it ran.
// Fault phases are counted and shown, not required.
type Required struct {
	JobTransitions, AttemptTransitions, Replies, Faults []string
}

// RequiredCoverage is the gate's list:
//
//   - every transition of SPEC section 2's tables that the rules of section
//     3 take. The tables allow four more that no operation takes, so they
//     are shown but not required: cancelling->failed (a cancelling job ends
//     cancelled, whatever its attempt does) and leased, downloading or
//     running->cancelled (a cancel leaves a lease-phase attempt live; it
//     ends failed or lost, or cancelled only at a commit from uploading);
//   - every reply code of section 3 the harness can provoke, lease_conflict
//     with each of its reasons (attempt_lost is never a reply), and
//     Withdraw's withdrawn and withdraw_conflict;
//   - every fault kind the generator draws, and a boundary tick landing on
//     each kind of boundary (lease expiry, admission deadline, heartbeat
//     deadline) exactly and one microsecond either side;
//   - the pause rule: each of pause's and resume's four replies, a lease
//     the pause decided (paused_lease) and a sweep that failed a paused
//     service's job at its deadline (paused_expiry).
func RequiredCoverage() Required {
	req := Required{
		JobTransitions: []string{"queued->active", "queued->cancelled", "queued->failed",
			"active->queued", "active->verifying", "active->cancelling", "active->failed",
			"verifying->succeeded", "verifying->cancelling", "verifying->failed",
			"cancelling->cancelled"},
		AttemptTransitions: []string{"leased->downloading", "leased->running", "leased->uploading",
			"leased->failed", "leased->lost",
			"downloading->running", "downloading->uploading", "downloading->failed", "downloading->lost",
			"running->uploading", "running->failed", "running->lost",
			"uploading->committing", "uploading->failed", "uploading->lost", "uploading->cancelled",
			"committing->succeeded", "committing->failed", "committing->cancelled"},
		Faults: []string{FaultStaleAttempt, FaultForeignDevice, FaultWrongEpoch, FaultWrongToken, FaultStaleToken,
			FaultBadOutput, FaultBadFailureCode, FaultForeignBuyer, FaultClockJump, FaultUnknownService,
			FaultBadMaxAttempts, FaultUnstorableParams, FaultDuplicate, FaultReorder,
			FaultPausedLease, FaultPausedExpiry},
	}
	req.Faults = append(req.Faults, boundaryFaults()...)
	for _, c := range []protocol.Code{protocol.CodeCreated, protocol.CodeValidation, protocol.CodeInsufficientFunds,
		protocol.CodeIdempotencyConflict, protocol.CodeLeaseOffer, protocol.CodeNoJob, protocol.CodeNoSlot,
		protocol.CodeProgressOK, protocol.CodeCommitPending, protocol.CodeCommitOK, protocol.CodeCommitConflict,
		protocol.CodeAttemptNotCommittable, protocol.CodeLeaseExpired, protocol.CodeJobCancelled,
		protocol.CodeVerificationFailed, protocol.CodeFailOK, protocol.CodeFailConflict, protocol.CodeBadFailureCode,
		protocol.CodeWithdrawn, protocol.CodeWithdrawConflict, protocol.CodeCancelled, protocol.CodeCancelling, protocol.CodeJobTerminal, protocol.CodeNotFound,
		protocol.CodeUploadOK, protocol.CodeOutputSealed,
		protocol.CodePaused, protocol.CodeAlreadyPaused, protocol.CodeResumed, protocol.CodeNotPaused} {
		req.Replies = append(req.Replies, string(c))
	}
	for _, reason := range []protocol.ConflictReason{protocol.ReasonIdentityMismatch, protocol.ReasonAttemptTerminal,
		protocol.ReasonLeaseExpired, protocol.ReasonJobCancelling, protocol.ReasonPhaseRegression} {
		req.Replies = append(req.Replies, string(protocol.CodeLeaseConflict)+"/"+string(reason))
	}
	for _, l := range []*[]string{&req.JobTransitions, &req.AttemptTransitions, &req.Replies, &req.Faults} {
		slices.Sort(*l)
	}
	return req
}
