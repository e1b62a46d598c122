//go:build !mutations

package gateway

import "github.com/rendermac/rendermac/internal/variantset"

// variant is empty in the default build: its hooks are the constant false,
// so the broken branches compile away. See variant_on.go.
type variant struct{}

// variants is empty: the default build has no broken gateway.
var variants = variantset.New[Variant]("gateway")

func newVariant(m Variant) variant {
	variants.Must(m)
	return variant{}
}

func (variant) ackProgressOnError() bool { return false }
func (variant) releaseBeforeReply() bool { return false }
func (variant) sessionFenced() bool      { return false }
func (variant) heartbeatRejected() bool  { return false }
