// Package model is the execution model: a storage-free, deterministic,
// single-threaded implementation of the operations of SPEC section 3, with
// the exact order of checks and effects of docs/semantics.md.
//
// The model is the "dumb alternative version" the harness compares the
// Postgres service layer against, reply by reply and row by row: it has no
// goroutines, no I/O and no clock (every operation takes now as a
// parameter), and it draws every id and token from the protocol.IDSource it
// is given, so that both implementations fed the same seeded source and the
// same event sequence must produce the same replies and the same Snapshot.
//
// CheckInvariants checks SPEC section 4 after a step. It is incremental:
// it replays the journal rows appended since the last call, checks the
// attempts inserted since then, and re-examines only the jobs, devices and
// buyers the step touched, against bookkeeping of its own (a replayed status
// per row, a live-attempt tally per device, held and captured tallies per
// buyer) that the operations never read. That keeps a check after every
// step cheap while still catching each deliberately broken Variant.
//
// Illegal events (unknown ids, foreign devices, stale tokens) are answered
// with the contract's reply codes, because the fault injector sends them on
// purpose. A status write the transition tables refuse is a broken internal
// invariant and panics.
package model
