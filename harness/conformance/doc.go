// Package conformance is one table of contract cases (SPEC sections 3 to 7:
// create, lease, progress, commit, fail, cancel, sweep) that every
// implementation of fuzz.Target runs, as river's riverdrivertest.Exercise
// does for its drivers: the model (harness/model, through fuzz.ModelTarget), the
// Postgres service layer and the full stack. A case plays a short script of
// operations at explicit instants and asserts the contract's replies, the
// projected rows and the journal, and that every step leaves the target's
// invariants intact.
//
// The cases were written twice before, once over the model and once over
// the service layer; here each is written once, with the assertions of
// both. What only one implementation has (the model's random walks, the
// server's round-trip counts, a broken artifact store) stays in that
// implementation's own tests.
//
// The package imports only faults, protocol and test libraries, so any
// implementation can run it: the runs themselves are test files next to the
// targets (harness/model/conformance_test.go for the model; the Postgres and stack
// runs in this package's targets_test.go).
package conformance
