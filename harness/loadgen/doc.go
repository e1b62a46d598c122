// Package loadgen is the load clients that `rendermac bench`, `rendermac
// soak` and the end-to-end tests share: HandlerTransport, which serves a
// buyer client's (package client) requests by an API handler in process
// (the fault harness's stack target uses it), and one synthetic agent
// fleet (Fleet) that dials the device gateway with harness/deviceclient
// clients, takes every lease_offer to a per-caller script (Work) and
// uploads a small valid MP4. Buyers use package client itself: one client
// for the CLI, the harness and every buyer.
//
// It imports only the protocol and the test clients, never the harness
// (benchrun, soak, scenarios, faults): what a caller measures or injects is
// its own, passed in as a script or a hook.
package loadgen
