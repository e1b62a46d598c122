package sim

import (
	"time"

	"github.com/rendermac/rendermac/protocol"
)

// Config is the model's configuration. The zero value is the contract's
// defaults: a 30s lease, a 90s heartbeat window and protocol.Services.
type Config struct {
	LeaseTTL        time.Duration      // default 30s when zero
	HeartbeatWindow time.Duration      // default 90s when zero
	Services        []protocol.Service // default protocol.Services when nil
	// Mutation selects a deliberately broken variant, for proving that the
	// invariant checks can fail; it is MutationNone in real use.
	Mutation Mutation
}

// Defaults of docs/semantics.md ("Common rules").
const (
	leaseTTLDefault        = 30 * time.Second
	heartbeatWindowDefault = 90 * time.Second
)

// withDefaults fills the zero fields, so the rest of the model never has to
// ask whether a setting was given.
func (c Config) withDefaults() Config {
	if c.LeaseTTL == 0 {
		c.LeaseTTL = leaseTTLDefault
	}
	if c.HeartbeatWindow == 0 {
		c.HeartbeatWindow = heartbeatWindowDefault
	}
	if c.Services == nil {
		c.Services = protocol.Services
	}
	return c
}

// Mutation names a deliberately broken variant of the model. Each one breaks
// exactly one rule and each is caught by CheckInvariants; the tests prove it.
type Mutation string

// The broken variants.
const (
	// MutationNone is the correct model.
	MutationNone Mutation = ""
	// MutationCommitFromCancelling lets transaction 2 succeed a cancelling
	// job, bypassing the transition assert and writing the status directly
	// (with its journal row), as a careless implementation would.
	MutationCommitFromCancelling Mutation = "commit_from_cancelling"
	// MutationNoEpochCheck makes commit ignore lease_epoch.
	MutationNoEpochCheck Mutation = "no_epoch_check"
	// MutationRequeuePastBudget makes fail and sweep ignore max_attempts.
	MutationRequeuePastBudget Mutation = "requeue_past_budget"
	// MutationKeepSlot leaves a device slot occupied when an attempt ends.
	MutationKeepSlot Mutation = "keep_slot"
)
