package protocol

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestViolationString(t *testing.T) {
	t.Parallel()
	require.Equal(t, "invariant 9: device d occupies 1 slots but has 0 live attempts",
		Violation{Invariant: 9, Message: "device d occupies 1 slots but has 0 live attempts"}.String())
}
