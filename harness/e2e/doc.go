// Package e2e holds the end-to-end tests of RenderMac: the real control
// plane (controlplane.Run: HTTP API, device gateway, sweeper, webhook
// deliverer) over a real Postgres, and the real agent (agent.New + Run)
// paired through POST /v1/provider/pair, driven only through the public
// HTTP API. Faults are injected from outside the code under test: a TCP
// proxy that resets the agent's WebSocket, a SIGKILLed agent process, a
// control plane stopped and started again on the same address and database.
//
// The package has no non-test code; this file exists so that `go vet` and
// `go build` see a package.
package e2e
