//go:build !faultpoints

package faultpoint

import (
	"context"
	"fmt"
	"os"
)

// Enabled reports whether this binary was built with -tags faultpoints.
const Enabled = false

// Points is a registry of armed points; in this build it holds nothing.
type Points struct{}

// New returns a registry; in this build it holds nothing.
func New() *Points { return &Points{} }

// Hit does nothing in this build; the compiler inlines it away.
func (*Points) Hit(ctx context.Context, name string) {}

// Hit does nothing in this build; the compiler inlines it away.
func Hit(ctx context.Context, name string) {}

// EnableFromEnv refuses when EnvVar is set: this binary cannot inject
// faults, and must not start as if it had.
func EnableFromEnv() error {
	if v := os.Getenv(EnvVar); v != "" {
		return fmt.Errorf("%s=%q is set, but this binary was built without -tags faultpoints, so no fault would be injected; "+
			"rebuild with `go build -tags faultpoints` or unset %s", EnvVar, v, EnvVar)
	}
	return nil
}

// Armed returns the armed points; none in this build.
func Armed() []string { return nil }
