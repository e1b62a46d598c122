// Package store owns the Postgres schema of the control plane and the
// read-side projections over it.
//
// The schema is a set of embedded goose migrations (migrations/*.sql). It
// restates the contract's rules as constraints wherever the database can
// hold them: a domain or CHECK on every status, code and hash column, a
// partial unique index that refuses a second live attempt for a job, a unique
// terminal webhook per job, and triggers that refuse any status change the
// transition tables of SPEC section 2 do not allow. Migration 00004 holds the
// same rules more cheaply: single-column rules are domains (checked when a
// value is written, not on every UPDATE of the row) and the triggers keep the
// tables in their WHEN clauses, so a legal write never enters plpgsql. The service layer (package server) enforces
// the same rules in Go first; the database is the second line.
//
// Snapshot projects the rows the harness compares with the model
// (protocol.Snapshot), and CheckInvariants evaluates SPEC section 4 over the
// real rows. Both take a Querier, so they run on a pool or inside a
// transaction.
//
// The SQL facts the control plane's statements share are written once, in
// facts.go, and spliced into them: the live statuses, the lease phases and
// their ranks (built from protocol's statuses and checked against its
// predicates, as are the migrations' live partial indexes), the device
// heartbeat, the journal insert, NOTIFY and the database clock
// (ResolveNow, NowArg).
package store
