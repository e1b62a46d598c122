package model

// SnapshotViolations lets the conformance run (package sim_test) apply the
// from-scratch snapshot check to the model it drives.
var SnapshotViolations = snapshotViolations
