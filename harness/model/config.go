package model

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
	// Variant selects a deliberately broken variant, for proving that the
	// invariant checks can fail; it is VariantNone in real use.
	Variant Variant
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

// Variant names a deliberately broken variant of the model. Each one breaks
// exactly one rule and each is caught by CheckInvariants; the tests prove it.
type Variant string

// The broken variants.
const (
	// VariantNone is the correct model.
	VariantNone Variant = ""
	// VariantCommitFromCancelling lets transaction 2 succeed a cancelling
	// job, bypassing the transition assert and writing the status directly
	// (with its journal row), as a careless implementation would.
	VariantCommitFromCancelling Variant = "commit_from_cancelling"
	// VariantNoEpochCheck makes commit ignore lease_epoch.
	VariantNoEpochCheck Variant = "no_epoch_check"
	// VariantRequeuePastBudget makes fail and sweep ignore max_attempts.
	VariantRequeuePastBudget Variant = "requeue_past_budget"
	// VariantKeepSlot leaves a device slot occupied when an attempt ends.
	VariantKeepSlot Variant = "keep_slot"
	// VariantWithdrawCharged withdraws an offer without counting it in
	// withdrawn_count, so the undelivered attempt spends the job's budget.
	VariantWithdrawCharged Variant = "withdraw_charged"
)
