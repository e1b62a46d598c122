// Package contract checks the tables protocol encodes against the contract's
// own text (docs/SPEC.md and docs/semantics.md, embedded by package docs):
// the failure codes and which of them are retryable, the job and attempt
// state machines, the lease phases and their ranks, the bounds of
// max_attempts and of the admission window, the commit token's size,
// encoding and stored hash, the wire's read limit, the lease_conflict reasons, the reply codes,
// CreateJob's validation order and the journal's actors.
//
// The model (sim) and the server share these tables through protocol, so a
// wrong table is invisible to a differential run: both implementations agree
// on the wrong value. Only a comparison with the text catches it, which is
// why `rendermac qualify` runs Check and fails its card on any mismatch.
//
// The parser reads each list at a fixed anchor in the text (a label such as
// "Retryable:" or the table's code block) and fails, naming the file and the
// anchor (or the line it found and could not read), when the text moved: the
// check never passes by finding nothing.
package contract
