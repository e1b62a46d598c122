// Package fuzz is the fault injector's core: one seed, one PRNG, a
// generator of event sequences over the alphabet of SPEC section 7
// (create, lease, progress, commit with verification pass or fail, fail,
// tick, sweep, cancel) with perturbations (foreign device, wrong epoch,
// wrong or stale token, stale attempt, duplicated and reordered frames), a
// Target interface that the model, the Postgres service layer and the full
// stack implement, a runner that plays one sequence against several targets
// and compares every reply and the projected state after every step, and a
// shrinker that reduces a failing sequence to a minimal one.
//
// Events are symbolic ("commit on job #2's latest attempt with a stale
// token"); they are resolved into concrete frames against the identities
// the targets handed out, so one sequence means the same thing to every
// target. faults never imports a database or server package: targets that
// need them are adapted outside (package scenarios).
package fuzz
