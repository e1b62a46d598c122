// Package loadgen is the load clients that `rendermac bench`, `rendermac
// soak` and the end-to-end tests share: a typed buyer client of the HTTP
// API (Buyer, which the fault harness's stack target and the scenarios
// also use, the former through HandlerTransport), the HTTP counterpart of the agent-side protocol client
// harness/deviceclient, and one synthetic agent fleet (Fleet) that
// dials the device gateway with deviceclient clients, takes every
// lease_offer to a per-caller script (Work) and uploads a small valid MP4.
//
// It imports only the protocol, the API's view types and the test
// clients, never the harness (benchrun, soak, scenarios, faults): what a
// caller measures or injects is its own, passed in as a script or a hook.
package loadgen
