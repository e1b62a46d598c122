//go:build !mutations

package gateway

import (
	"fmt"

	"github.com/rendermac/rendermac/server/fencing"
)

// variant is empty in the default build: its hooks are the constant false,
// so the broken branches compile away. See variant_on.go.
type variant struct{}

// newVariant refuses a variant this build does not have (callers check
// with CheckVariant first).
func newVariant(m Variant) variant {
	if err := CheckVariant(m); err != nil {
		panic("gateway: " + err.Error())
	}
	return variant{}
}

// Variants lists the broken gateways this build has: none.
func Variants() []Variant { return nil }

// CheckVariant accepts only VariantNone in the default build.
func CheckVariant(m Variant) error {
	if m != VariantNone {
		return fmt.Errorf("gateway variant %q: %w", m, fencing.ErrNoVariants)
	}
	return nil
}

func (variant) ackProgressOnError() bool { return false }
func (variant) releaseBeforeReply() bool { return false }
func (variant) sessionFenced() bool      { return false }
func (variant) heartbeatRejected() bool  { return false }
