package main

import (
	"io"
	"testing"

	"github.com/stretchr/testify/require"
)

// The variant flags' names before issue 26 (--model-mutation,
// --server-mutation, --mutation) still set the same value, so scripts
// written against them keep working.
func TestVariantFlagAliases(t *testing.T) {
	for _, args := range [][]string{
		{"--model-variant", "keep_slot", "--server-variant", "no_listen"},
		{"--model-mutation", "keep_slot", "--server-mutation", "no_listen"},
	} {
		f, err := parseQualifyFlags(args, io.Discard)
		require.NoError(t, err, "%v", args)
		require.Equal(t, "keep_slot", f.ModelVariant, "%v", args)
		require.Equal(t, "no_listen", f.ServerVariant, "%v", args)
	}
	_, err := parseQualifyFlags([]string{"--server-mutation", "no_such_variant"}, io.Discard)
	require.ErrorContains(t, err, "--server-variant: unknown variant")
}
