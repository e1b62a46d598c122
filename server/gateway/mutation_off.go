//go:build !mutations

package gateway

import (
	"fmt"

	"github.com/rendermac/rendermac/server"
)

// variant is empty in the default build: its hooks are the constant false,
// so the broken branches compile away. See mutation_on.go.
type variant struct{}

// newVariant refuses a variant this build does not have (callers check
// with CheckMutation first).
func newVariant(m Mutation) variant {
	if err := CheckMutation(m); err != nil {
		panic("gateway: " + err.Error())
	}
	return variant{}
}

// Mutations lists the broken gateways this build has: none.
func Mutations() []Mutation { return nil }

// CheckMutation accepts only MutationNone in the default build.
func CheckMutation(m Mutation) error {
	if m != MutationNone {
		return fmt.Errorf("gateway variant %q: %w", m, server.ErrNoMutations)
	}
	return nil
}

func (variant) ackProgressOnError() bool { return false }
func (variant) releaseBeforeReply() bool { return false }
func (variant) sessionFenced() bool      { return false }
func (variant) heartbeatRejected() bool  { return false }
