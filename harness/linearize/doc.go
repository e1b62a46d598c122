// Package linearize checks that concurrent histories of the contract's
// operations are linearizable against the model (model.ExecutionModel), with
// porcupine.
//
// A Recorder drives a Target (the Postgres service layer, or LockedModel,
// the model behind one mutex, for the checker's own tests) from many
// clients at once and records every operation's call, return, input and
// reply; RunWorkload is the seeded workload of honest agents, adversaries
// and cancellers that produces such a History, and Check decides it, job
// by job. Why checking per job is sound, and how time is handled, is argued
// at the top of linearize.go.
package linearize
