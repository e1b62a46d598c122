// Package fencing is the fenced control plane on Postgres: CreateJob, Lease,
// Progress, Commit (transaction 1, verification, transaction 2), Fail,
// Cancel and Sweep of SPEC section 3, with the exact order of checks and
// effects of docs/semantics.md, so that a harness can compare it reply by
// reply and row by row with the storage-free model.
//
// # Outcomes and errors
//
// Every contract outcome is a protocol.Reply code. The error return is only
// for infrastructure trouble, plus ErrInternal for a state the locks should
// have made impossible (a fenced write that matched other than one row,
// which Postgres itself refuses, see fenced; an illegal transition): that
// is reported, never worked around.
//
// # Time and ids
//
// Every operation takes now. A zero now means the database clock
// (store.SQLNow, read by store.ResolveNow), read once per transaction
// (Progress is one statement, see sqlProgress), so every
// check and timestamp in a transaction uses one instant and gateways with
// skewed clocks agree; the code never calls time.Now for a decision. Ids and
// commit tokens come from a protocol.IDSource and are drawn only when a row
// is inserted; a transaction re-run after a serialization failure reuses the
// draws of the first run.
//
// # Fencing
//
// Every agent-facing write is guarded in its WHERE clause by the full fence:
// attempt id, job id, the device and lease epoch the agent presented, and the
// status the row was locked in. Tokens are compared in Go with
// protocol.VerifyCommitToken (constant time) after the attempt row is
// locked; only their hashes are stored and none is ever logged. Every status
// write calls protocol.Assert*Transition first, and a database trigger
// refuses the same illegal transitions again.
//
// # Lock order, and why it cannot deadlock
//
// Transactions run at READ COMMITTED; explicit row locks give each decision
// its serial view. Every transaction that decides about a job locks at most
// one job row, and locks it first (SELECT ... FOR UPDATE by the id the
// caller presented), then that job's attempt row (by attempt id and job id
// together, so it never locks an attempt of a job it does not hold), then
// any buyer row (hold settlement) or device row (the heartbeat of an
// accepted progress, commit or fail).
//
// Lease is the one transaction that starts elsewhere: it locks the device
// row first (so that counting the device's live attempts against
// slots_total and inserting a new one is atomic per device), then picks a
// job with FOR UPDATE SKIP LOCKED. It therefore never waits for a job lock,
// and the attempt it inserts conflicts with no concurrent insert (its job is
// locked). A transaction holding a job lock may wait for Lease's device
// lock, but Lease never waits for anything a job-first transaction holds, so
// no cycle can form. CreateJob locks the buyer row first and then only
// inserts new rows; hold settlement waits for that lock but CreateJob waits
// for nothing. Sweep decides each candidate in its own transaction and locks
// devices in id order. Deadlocks (40P01) and serialization failures (40001)
// that happen anyway are retried, bounded by Config.MaxTxRetries and counted
// in Stats.
//
// # Broken variants
//
// Config.Variant selects a deliberately broken variant (see Variant) so
// that the harness can prove it catches a broken fence. The variants exist
// only in a build with -tags mutations; in the default build each hook the
// fences consult is the constant false and compiles away.
package fencing
