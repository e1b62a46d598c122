// Package targets wires the fault injector's core (package faults) to the
// real implementations: the Postgres service layer as a fuzz.Target
// (PostgresTarget), so one generated sequence runs against the model and
// Postgres and is compared step by step, and the full stack (StackTarget:
// the HTTP API and the WebSocket gateways, driven over real sessions with
// each device's own token) as a third target of the same comparison
// (ThreeWayFactory).
//
// It also owns what every harness shares about them: the migrated template
// database harness databases are cloned from (TemplateName, OpenPostgres),
// and the synthetic output every harness attempt uploads (SyntheticOutput).
package targets
