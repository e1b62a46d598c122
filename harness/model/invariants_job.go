package model

import (
	"github.com/rendermac/rendermac/protocol"
)

// checkJob re-checks one touched job: its attempts (1, 2, 4, 5, and the
// device tallies of 9), its replayed status (4), its requeues (5), its
// success (3, 8) and its money (7).
func (m *ExecutionModel) checkJob(j *job) {
	m.checkAttempts(j)
	c := &m.chk
	if j.chk.replayed != j.row.Status {
		c.fail(4, "job %s is %s but its journal replays to %q", j.row.ID, j.row.Status, j.chk.replayed)
	}
	for ; j.chk.requeuesSeen < len(j.requeues); j.chk.requeuesSeen++ {
		f := j.requeues[j.chk.requeuesSeen]
		if f.spent >= f.maxAttempts {
			c.fail(5, "job %s requeued having spent %d of max_attempts %d", j.row.ID, f.spent, f.maxAttempts)
		}
		if !f.at.Before(f.deadline) {
			c.fail(5, "job %s requeued at %s, not before its admission deadline %s", j.row.ID, f.at, f.deadline)
		}
	}
	if j.row.Status == protocol.JobSucceeded {
		m.checkSuccess(j)
	}
	m.checkMoney(j)
}

// checkAttempts checks a job's attempts: numbers 1..n matching
// attempt_count, at most one live, none live on a terminal job, none past
// the budget (withdrawn offers, which withdrawn_count counts, spend none),
// each status equal to its replay. It also moves the device tallies of
// invariant 9 for every attempt whose liveness changed.
func (m *ExecutionModel) checkAttempts(j *job) {
	c := &m.chk
	live, withdrawn := 0, 0
	for i, a := range j.attempts {
		if a.row.Number != i+1 {
			c.fail(1, "job %s: attempt %s has number %d at position %d", j.row.ID, a.row.ID, a.row.Number, i+1)
		}
		if spent := a.row.Number - withdrawn; spent > j.row.MaxAttempts {
			c.fail(5, "job %s: attempt %s is number %d after %d withdrawn offers, past max_attempts %d", j.row.ID,
				a.row.ID, a.row.Number, withdrawn, j.row.MaxAttempts)
		}
		if a.row.FailureCode == protocol.FailOfferWithdrawn {
			withdrawn++
		}
		if a.chkReplayed != a.row.Status {
			c.fail(4, "attempt %s of job %s is %s but its journal replays to %q", a.row.ID, j.row.ID, a.row.Status,
				a.chkReplayed)
		}
		isLive := a.row.Status.Live()
		if isLive {
			live++
		}
		if isLive != a.chkLive {
			a.chkLive = isLive
			if isLive {
				a.device.chkLive++
			} else {
				a.device.chkLive--
			}
			m.touchDevice(a.device)
		}
	}
	if len(j.attempts) != j.row.AttemptCount {
		c.fail(1, "job %s has %d attempts but attempt_count %d", j.row.ID, len(j.attempts), j.row.AttemptCount)
	}
	if withdrawn != j.row.WithdrawnCount {
		c.fail(5, "job %s has %d withdrawn offers but withdrawn_count %d", j.row.ID, withdrawn, j.row.WithdrawnCount)
	}
	if live > 1 {
		c.fail(1, "job %s has %d live attempts", j.row.ID, live)
	}
	if live > 0 && j.row.Status.Terminal() {
		c.fail(2, "%s job %s still has a live attempt", j.row.Status, j.row.ID)
	}
}

// checkSuccess is invariants 3 and 8 for a succeeded job: it got there from
// verifying, through an attempt of its own whose transaction-1 fence matched
// all four identities and the token on an unexpired lease, and it records
// that attempt's claimed output at that attempt's key.
func (m *ExecutionModel) checkSuccess(j *job) {
	c := &m.chk
	if j.chk.succeededFrom != protocol.JobVerifying {
		c.fail(3, "job %s reached succeeded from %q, not from verifying", j.row.ID, j.chk.succeededFrom)
	}
	a := m.attempts[j.row.SucceededAttemptID]
	if a == nil || a.job != j {
		c.fail(3, "job %s succeeded with attempt %q, not one of its own", j.row.ID, j.row.SucceededAttemptID)
		return
	}
	if a.row.Status != protocol.AttemptSucceeded {
		c.fail(3, "job %s succeeded with attempt %s, which is %s", j.row.ID, a.row.ID, a.row.Status)
	}
	f := a.fence
	if !f.entered || f.jobID != a.row.JobID || f.deviceID != a.row.DeviceID || f.epoch != a.row.LeaseEpoch ||
		!f.tokenOK || !f.unexpired {
		c.fail(3, "job %s succeeded with attempt %s whose commit did not match (job %q device %q epoch %d of %d, "+
			"token %t, unexpired %t)", j.row.ID, a.row.ID, f.jobID, f.deviceID, f.epoch, a.row.LeaseEpoch, f.tokenOK,
			f.unexpired)
	}
	if j.outputKey != protocol.OutputKey(j.row.ID, a.row.ID) {
		c.fail(8, "job %s output key %q is not attempt %s's key", j.row.ID, j.outputKey, a.row.ID)
	}
	if j.outputBytes != a.claimed.Bytes || j.row.OutputSHA256 != a.claimed.SHA256 {
		c.fail(8, "job %s output (%d bytes, %s) is not attempt %s's claim (%d bytes, %s)", j.row.ID, j.outputBytes,
			j.row.OutputSHA256, a.row.ID, a.claimed.Bytes, a.claimed.SHA256)
	}
}

// checkMoney is invariant 7 for one job: the hold matches the status (held
// while open; settled once, captured exactly on success, once terminal) and
// a terminal job has one webhook with the terminal event. It moves the job's
// hold into its buyer's tallies, which checkBuyer compares.
func (m *ExecutionModel) checkMoney(j *job) {
	c := &m.chk
	if j.row.Status.Terminal() {
		want := protocol.HoldReleased
		if j.row.Status == protocol.JobSucceeded {
			want = protocol.HoldCaptured
		}
		if j.row.HoldStatus != want || j.settles != 1 {
			c.fail(7, "%s job %s has hold %s settled %d times", j.row.Status, j.row.ID, j.row.HoldStatus, j.settles)
		}
		if j.row.Webhooks != 1 || j.webhookEvent != j.row.Status {
			c.fail(7, "%s job %s has %d webhooks (last %q)", j.row.Status, j.row.ID, j.row.Webhooks, j.webhookEvent)
		}
	} else if j.row.HoldStatus != protocol.HoldHeld || j.settles != 0 || j.row.Webhooks != 0 {
		c.fail(7, "%s job %s has hold %s, %d settlements, %d webhooks", j.row.Status, j.row.ID, j.row.HoldStatus,
			j.settles, j.row.Webhooks)
	}
	if j.chk.hold != j.row.HoldStatus {
		j.buyer.tally(j.chk.hold, -j.row.HoldCents)
		j.buyer.tally(j.row.HoldStatus, j.row.HoldCents)
		j.chk.hold = j.row.HoldStatus
	}
	m.chk.touchBuyer(j.buyer)
}

// checkBuyer is the conservation half of invariant 7, run after every
// touched job has moved its hold into the tallies (one step may settle
// several jobs of one buyer).
func (c *checker) checkBuyer(b *buyer) {
	if b.held != b.chkHeld || b.captured != b.chkCaptured+b.chkPruned || b.pruned != b.chkPruned {
		c.fail(7, "buyer %s records held %d captured %d (pruned %d), its holds sum to held %d captured %d (pruned %d)",
			b.id, b.held, b.captured, b.pruned, b.chkHeld, b.chkCaptured, b.chkPruned)
	}
	if b.balance < 0 || b.balance+b.held+b.captured != b.initial {
		c.fail(7, "buyer %s: balance %d + held %d + captured %d != credited %d", b.id, b.balance, b.held, b.captured,
			b.initial)
	}
}

// checkPruned takes a pruned job's hold out of its buyer's tallies: a
// captured one moves to the pruned tally, which with the captured holds
// left must sum to the buyer's captured cents (invariant 7 on a pruned
// state). A job Prune removed must have been finished.
func (c *checker) checkPruned(j *job) {
	if !j.row.Status.Terminal() {
		c.fail(7, "pruned job %s was %s, not finished", j.row.ID, j.row.Status)
	}
	b := j.buyer
	// The hold as the job left it, whether or not a check saw it settle.
	b.tally(j.chk.hold, -j.row.HoldCents)
	j.chk.hold = j.row.HoldStatus
	if j.chk.hold == protocol.HoldCaptured {
		b.chkPruned += j.row.HoldCents
	}
	j.chk.hold = ""
	c.touchBuyer(b)
}

// tally adds cents to the checker's sum for a hold status; a released (or
// not yet seen) hold is in no sum.
func (b *buyer) tally(s protocol.HoldStatus, cents int64) {
	switch s {
	case protocol.HoldHeld:
		b.chkHeld += cents
	case protocol.HoldCaptured:
		b.chkCaptured += cents
	}
}
