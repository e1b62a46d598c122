//go:build mutations

package gateway

import "github.com/rendermac/rendermac/internal/variantset"

// The gateway mutations, only in a build with -tags mutations. Each is one
// branch, taken only when Config.Variant equals it.
const (
	// VariantAckProgressOnError answers progress_ok when the service call
	// failed, although nothing was decided.
	VariantAckProgressOnError Variant = "ack_progress_on_error"
	// VariantReleaseBeforeReply frees the slot (and so offers) before
	// writing the commit decision.
	VariantReleaseBeforeReply Variant = "release_before_reply"
	// VariantSessionFenced fences progress by the session an attempt was
	// offered on, as if the WebSocket connection were the lease: an agent
	// that reconnects can no longer go on with the attempt it holds.
	VariantSessionFenced Variant = "session_fenced"
	// VariantHeartbeatRejected heartbeats the device on a rejected frame
	// (lease_conflict, a refused commit or fail), as if a refusal proved
	// the device alive.
	VariantHeartbeatRejected Variant = "heartbeat_rejected"
)

// variants are the broken gateways (Variants, CheckVariant).
var variants = variantset.New("gateway", VariantAckProgressOnError, VariantReleaseBeforeReply, VariantSessionFenced,
	VariantHeartbeatRejected)

// variant is the broken gateway a Gateway runs.
type variant struct{ m Variant }

func newVariant(m Variant) variant { return variant{m: variants.Must(m)} }

func (v variant) ackProgressOnError() bool { return v.m == VariantAckProgressOnError }
func (v variant) releaseBeforeReply() bool { return v.m == VariantReleaseBeforeReply }
func (v variant) sessionFenced() bool      { return v.m == VariantSessionFenced }
func (v variant) heartbeatRejected() bool  { return v.m == VariantHeartbeatRejected }
