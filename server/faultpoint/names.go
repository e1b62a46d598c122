package faultpoint

// EnvVar is the environment variable EnableFromEnv reads.
const EnvVar = "RENDERMAC_FAULTPOINTS"

// The fault points. Each comment says where the server hits it.
const (
	// CommitBeforeTx1 is hit at the start of fencing.Service.CommitBegin,
	// before commit transaction 1 begins.
	CommitBeforeTx1 = "commit.before_tx1"
	// CommitAfterTx1 is hit in CommitBegin once transaction 1 has ended
	// (committed, or failed with the returned error).
	CommitAfterTx1 = "commit.after_tx1"
	// CommitDuringVerify is hit in fencing.Service.Verify after the claim
	// was read and before the artifact is checked, outside any transaction;
	// the sweeper's re-verification hits it too.
	CommitDuringVerify = "commit.during_verify"
	// CommitBeforeTx2 is hit before commit transaction 2 begins, both after
	// a device's commit (fencing.Service.CommitFinish) and when the sweeper
	// finishes an abandoned one. A Kill here leaves the attempt committing
	// and the job verifying: the crash the sweeper must recover from.
	CommitBeforeTx2 = "commit.before_tx2"
	// CommitAfterTx2 is hit once transaction 2 has ended.
	CommitAfterTx2 = "commit.after_tx2"
	// FailBeforeTx is hit in fencing.Service.Fail before its transaction
	// begins (after the failure code was found valid).
	FailBeforeTx = "fail.before_tx"
	// FailAfterTx is hit in Fail once its transaction has ended.
	FailAfterTx = "fail.after_tx"
	// CancelBeforeTx is hit in fencing.Service.Cancel before its transaction
	// begins.
	CancelBeforeTx = "cancel.before_tx"
	// CancelAfterTx is hit in Cancel once its transaction (and with it the
	// cancel notification) has ended.
	CancelAfterTx = "cancel.after_tx"
	// SweepBeforeTx is hit in fencing.Service.Sweep before each of its
	// deciding transactions: each expired lease, each abandoned commit
	// (after its re-verification, just before CommitBeforeTx2), each
	// expired admission, and the offline-devices update.
	SweepBeforeTx = "sweep.before_tx"
	// SweepAfterTx is hit after each of those transactions has ended.
	SweepAfterTx = "sweep.after_tx"
	// GatewayBeforeSlotRelease is hit in the gateway when a commit or fail
	// result that ended an attempt has been written to the device, before
	// the slot is freed and offered again.
	GatewayBeforeSlotRelease = "gateway.before_slot_release"
	// GatewayAfterOfferWrite is hit in the gateway when a lease offer has
	// been written to the device, its slot claim already ended. A Block
	// here holds the offering goroutine while the device answers, e.g.
	// with a slots report that must count the offer once.
	GatewayAfterOfferWrite = "gateway.after_offer_write"
	// CreateBeforeInsert is hit in fencing.Service.CreateJob inside its
	// transaction, after the buyer row lock, the idempotency lookup and the
	// funds check, just before the job row is written. A Block here holds
	// the buyer's row lock open, so a second create of the same buyer must
	// wait for it (an in-transaction point: a Kill here rolls it back).
	CreateBeforeInsert = "create.before_insert"
	// LeaseBeforePick is hit in fencing.Service.Lease inside its
	// transaction, after the device row lock and the count of its live
	// attempts against its slots, just before a job is picked. A Block
	// here holds the device's row lock open, so a second lease of the same
	// device must wait and count the first one's attempt.
	LeaseBeforePick = "lease.before_pick"
	// LeaseAfterPick is hit in fencing.Service.Lease inside its
	// transaction once the pick has locked the leased job's row (FOR UPDATE
	// SKIP LOCKED), before the attempt is inserted; a lease that found no
	// job does not hit it. A Block here holds that job's row lock (and the
	// device's) open: another device's lease must skip the job, not wait
	// for it, and a write of the harness's that waits on the lock can be
	// made part of a deadlock the lease then loses.
	LeaseAfterPick = "lease.after_pick"
	// GatewayBeforeLostFrame is hit in the gateway's session goroutine
	// that writes an attempt_lost frame (after the listener counted it
	// pending), before it writes it. A Block here holds the frame back:
	// every offer the session writes meanwhile must wait for it.
	GatewayBeforeLostFrame = "gateway.before_lost_frame"
	// PruneBeforeTx is hit in fencing.Service.PruneFinished before each
	// batch's transaction (the one statement that picks the batch with
	// FOR UPDATE SKIP LOCKED and deletes its rows).
	PruneBeforeTx = "prune.before_tx"
	// PruneBeforeStoreDelete is hit in PruneFinished once a batch's rows
	// are gone (its transaction committed), before its objects are deleted
	// from the artifact store. A Kill here is the crash that leaves the
	// objects queued in artifact_deletions for the next prune.
	PruneBeforeStoreDelete = "prune.before_store_delete"
)

// names is every fault point, in the order of the constants.
var names = []string{
	CommitBeforeTx1, CommitAfterTx1, CommitDuringVerify, CommitBeforeTx2, CommitAfterTx2,
	FailBeforeTx, FailAfterTx, CancelBeforeTx, CancelAfterTx, SweepBeforeTx, SweepAfterTx,
	GatewayBeforeSlotRelease, GatewayAfterOfferWrite, CreateBeforeInsert, LeaseBeforePick, LeaseAfterPick,
	GatewayBeforeLostFrame, PruneBeforeTx, PruneBeforeStoreDelete,
}

// Names returns every fault point name (a fresh slice).
func Names() []string { return append([]string(nil), names...) }

// Known reports whether name is one of the fault points.
func Known(name string) bool {
	for _, n := range names {
		if n == name {
			return true
		}
	}
	return false
}
