// Package scenarios wires the fault injector's core (package faults) to the
// real implementations: the Postgres service layer as a faults.Target, so
// one generated sequence runs against the model and Postgres and is compared
// step by step.
package scenarios
