//go:build mutations

package gateway

import (
	"fmt"
	"slices"
)

// The gateway mutations, only in a build with -tags mutations. Each is one
// branch, taken only when Config.Mutation equals it.
const (
	// MutationAckProgressOnError answers progress_ok when the service call
	// failed, although nothing was decided.
	MutationAckProgressOnError Mutation = "ack_progress_on_error"
	// MutationReleaseBeforeReply frees the slot (and so offers) before
	// writing the commit decision.
	MutationReleaseBeforeReply Mutation = "release_before_reply"
	// MutationSessionFenced fences progress by the session an attempt was
	// offered on, as if the WebSocket connection were the lease: an agent
	// that reconnects can no longer go on with the attempt it holds.
	MutationSessionFenced Mutation = "session_fenced"
	// MutationHeartbeatRejected heartbeats the device on a rejected frame
	// (lease_conflict, a refused commit or fail), as if a refusal proved
	// the device alive.
	MutationHeartbeatRejected Mutation = "heartbeat_rejected"
)

// Mutations lists the broken gateways.
func Mutations() []Mutation {
	return []Mutation{MutationAckProgressOnError, MutationReleaseBeforeReply, MutationSessionFenced,
		MutationHeartbeatRejected}
}

// CheckMutation reports whether m is MutationNone or one of Mutations.
func CheckMutation(m Mutation) error {
	if m != MutationNone && !slices.Contains(Mutations(), m) {
		return fmt.Errorf("unknown gateway mutation %q (known: %v)", m, Mutations())
	}
	return nil
}

// variant is the broken gateway a Gateway runs.
type variant struct{ m Mutation }

func newVariant(m Mutation) variant {
	if err := CheckMutation(m); err != nil {
		panic("gateway: " + err.Error())
	}
	return variant{m: m}
}

func (v variant) ackProgressOnError() bool { return v.m == MutationAckProgressOnError }
func (v variant) releaseBeforeReply() bool { return v.m == MutationReleaseBeforeReply }
func (v variant) sessionFenced() bool      { return v.m == MutationSessionFenced }
func (v variant) heartbeatRejected() bool  { return v.m == MutationHeartbeatRejected }
