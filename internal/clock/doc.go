// Package clock is the one time source that logic takes as a parameter:
// every config of the control plane, the agent and the harness takes a
// Clock. A Clock says whether it pins decisions (Pinned): Real does not,
// so the control plane decides at the database's now(), the single
// authority on time; a Stub does, so the harness decides at its instant.
// Either way a Clock serves what runs outside a transaction: timers for
// heartbeats, backoff, polling and lease renewals.
//
// Stored is the form every row stores (UTC, whole microseconds) and
// PinnedNow the instant a decision is handed (zero: the database's clock).
package clock
