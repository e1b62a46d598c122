// Package api is the control plane's HTTP surface for buyers, devices and
// operators (SPEC section 6): jobs, artifact grants, device pairing, health
// and metrics. It decides nothing about jobs itself; every state change goes
// through the fenced service layer (package server), and reads run in one
// read-only REPEATABLE READ transaction so that a job and its attempts are
// seen at one instant.
//
// # Credentials
//
// Every bearer secret (buyer API keys, device tokens, pairing codes) is
// stored only as the lowercase hex SHA-256 of its plaintext and is looked up
// by that hash, so no secret is compared byte by byte in Go: a timing
// difference in the index lookup reveals something about a hash, never about
// a secret. Artifact grants are HMACs compared in constant time by package
// grant. No secret, query string or Authorization header is ever logged.
//
// # Tenancy
//
// A buyer sees only its own jobs. Another buyer's job answers exactly like a
// missing one (404 not_found, same body), so job ids cannot be probed.
//
// # Time
//
// Decisions use the database clock, like the service layer: a pinned
// Config.Clock (clock.Stub) pins the instant for tests, and an unpinned one
// hands the service a zero time (meaning "database clock"). Pairing reads now() in its own
// transaction; grant expiry uses now() from Postgres as read at most once a
// second and carried forward on the monotonic clock in between (dbClock), so
// an artifact request costs no round trip for the time.
//
// # Errors
//
// Every error is JSON {"code": ..., "message": ...} (plus "field" for a
// validation_error) with a fitting status; the codes are listed in
// errors.go. Internal failures are logged with their cause and answered
// 500 internal without it.
package api
