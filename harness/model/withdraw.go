package model

import (
	"time"

	"github.com/rendermac/rendermac/protocol"
)

// Withdraw takes back an offer the gateway leased but could not deliver
// (SPEC section 3, Withdraw). The fence is Fail's, identity and token, and
// the attempt must still be leased: a device that acted on the offer (any
// phase, a commit, a fail) had it, so its attempt is not withdrawn. Any
// mismatch answers withdraw_conflict and mutates nothing. Otherwise the
// attempt fails with offer_withdrawn (actor matcher), the job's
// withdrawn_count grows by one, so the attempt spends none of its budget,
// and the job is cancelled (if cancelling), queued again while its
// deadline is ahead (Requeued true) or failed admission_expired. The device
// said nothing: no heartbeat.
func (m *ExecutionModel) Withdraw(now time.Time, deviceID string, w protocol.Withdrawal) protocol.Reply {
	now = normalize(now)
	a, ok, epochOK := m.authority(deviceID, w.JobID, w.AttemptID, w.LeaseEpoch, w.CommitToken)
	if !ok || !epochOK || a.row.Status != protocol.AttemptLeased {
		return protocol.Reply{Code: protocol.CodeWithdrawConflict}
	}
	j := a.job
	m.setAttempt(a, protocol.AttemptFailed, protocol.FailOfferWithdrawn, protocol.ActorMatcher, now)
	if m.cfg.Variant != VariantWithdrawCharged {
		j.row.WithdrawnCount++
	}
	switch {
	case j.row.Status == protocol.JobCancelling:
		m.setJob(j, protocol.JobCancelled, "", protocol.ActorMatcher, now)
	case now.Before(j.row.AdmissionDeadline):
		m.requeue(j, protocol.ActorMatcher, now)
		return protocol.Reply{Code: protocol.CodeWithdrawn, Requeued: true}
	default:
		m.setJob(j, protocol.JobFailed, protocol.FailAdmissionExpired, protocol.ActorMatcher, now)
	}
	return protocol.Reply{Code: protocol.CodeWithdrawn}
}
