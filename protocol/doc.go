// Package protocol is the contract shared by the execution model (sim), the
// Postgres control plane (server) and the Mac agent (agent): job and attempt
// statuses with their transition tables, lease phases and their ranks,
// failure codes and the retry policy's retryable set, reply codes, the wire
// messages of the provider WebSocket, and the commit token.
//
// It imports the standard library only, so that every implementation can
// depend on it without depending on each other. The names here are the names
// of SPEC.md; the model, the database, the wire and the evidence cards all
// use them so that one event sequence can be replayed against each and
// compared reply by reply.
package protocol
