// Package console is the operators' web console, served at /console by
// every control plane (SPEC section 6, "Console"): the fleet, the queue, the
// jobs of every buyer with their attempts and journal, and qualification
// cards. It is read-only over the control plane's rows, server-rendered
// with html/template (every page is complete without JavaScript; a small
// script only re-fetches a page when a server-sent event says it changed),
// and behind an operator credential that `rendermac admin create-operator`
// mints and stores hashed. A buyer's API key is refused (403), as is every
// non-loopback peer unless Config.Remote.
//
// Nothing secret is rendered: no API key, device token, commit token, any
// of their hashes, pairing code or signing key. The queries below never
// select those columns.
package console
