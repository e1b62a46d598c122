// Package faultpoint names the places in the control plane where a fault
// scenario may step in (SPEC section 7): before and after each transaction
// of commit, fail, cancel and sweep, during commit verification, and before
// the gateway frees a slot. At each place the server calls its registry's
// Hit (a nil *Points is the process's registry):
//
//	s.cfg.FaultPoints.Hit(ctx, faultpoint.CommitBeforeTx2)
//
// # Off unless built in
//
// In the default build Points is an empty struct and Hit an empty method
// that the compiler inlines away: production binaries carry no registry, no
// lookup and no branch.
// Only a binary built with
//
//	go build -tags faultpoints ./cmd/rendermac
//
// consults a registry. There a harness arms a point in-process with
// Set(name, action), where an Action is a func(ctx) run at the point:
// Block(ch) waits until ch is closed or ctx ends, Kill() SIGKILLs the own
// process (no deferred code, no flushed buffers: a crash), Inject(f) runs
// f, and Once(a) runs a only at the first hit. Clear disarms every point
// and resets the hit counters that Hits reports, so a scenario can assert
// that it reached the branch it exists for.
//
// Those functions use the process's registry. A harness that shares its
// process with other users of the service layer arms a registry of its
// own, New(), and passes it to its services (fencing.Config.FaultPoints),
// which then hit it instead: qualify runs the scenarios beside the
// campaigns, whose services hit the process's registry constantly, so a
// campaign's commit must neither fire a scenario's block nor count as the
// scenario's hit.
//
// # Arming a subprocess
//
// A server started as a subprocess is armed through the environment:
//
//	RENDERMAC_FAULTPOINTS=commit.before_tx2=kill,sweep.before_tx=block
//
// `rendermac server` calls EnableFromEnv before it starts. kill SIGKILLs
// the process at the point; block stalls the calling operation until its
// context ends (for the service layer, the gateway's forced stop), so a
// harness can freeze a process mid-operation and kill it from outside.
// Each armed point prints one line to stderr when it fires, so the log
// shows that the fault happened. An unknown point or action is an error,
// and nothing is armed. In the default build EnableFromEnv returns an
// error whenever the variable is set, saying the binary was built without
// -tags faultpoints: nobody should believe a fault was injected when it
// could not have been.
//
// # Where the points are
//
// The constants below name each point and say exactly where it is. A
// point "before" a transaction runs before it begins; "after" runs once it
// has committed (or failed), never inside one, so a Kill there leaves the
// database exactly as a crash between statements of the caller would.
// Three points are inside a transaction: create.before_insert and
// lease.before_pick just after its first row lock (the buyer's row, the
// device's row), and lease.after_pick once the pick has locked the
// leased job's row too. A Block there holds the locks open while a
// concurrent operation on the same rows runs, which is how a scenario
// shows that a lock is taken at all, or that another lease skips it.
package faultpoint
