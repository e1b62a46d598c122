// Package agent is the RenderMac Mac agent: it pairs a device with the control
// plane, holds one WebSocket session to the gateway (reconnecting with
// jittered exponential backoff), takes lease offers into its slots, and runs
// each attempt through download, runner, upload and commit while renewing the
// lease with progress heartbeats.
//
// The agent's state is one table of attempts it holds, guarded by a mutex and
// outliving any one connection. Frames are not queued: each attempt records
// what the gateway has yet to hear (phases not yet reported, the final commit
// or fail and whether it went out on the current connection), and a session's
// writer sends whatever is due. A reconnect therefore re-sends exactly what a
// dropped connection may have lost: the attempt's current phase and any final
// frame whose result never arrived. A slot is freed only when the gateway
// answers that final frame (or says the attempt is gone), matching the
// control plane's rule that a slot is released after the deciding transaction.
//
// Stopping: ending Run's context fails what runs as provider_offline;
// Drain (RunSignalled's first SIGTERM or SIGINT) instead reports no free
// slot and lets running attempts finish before Run returns.
//
// Secrets: the device token travels only in the WebSocket handshake header,
// and commit tokens only in commit and fail frames; neither is logged, and a
// commit token is dropped when its attempt ends. The agent imports protocol
// and internal packages only, never the server.
package agent
