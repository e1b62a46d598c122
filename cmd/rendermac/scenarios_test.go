package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/harness/scenarios"
)

func TestScenariosListNamesPrintsOneNameALine(t *testing.T) {
	var out, errb bytes.Buffer
	require.NoError(t, runScenarios(context.Background(), []string{"--list", "--names"}, &out, &errb))
	var want []string
	for _, s := range scenarios.Catalogue() {
		want = append(want, s.Name)
	}
	require.Equal(t, strings.Join(want, "\n")+"\n", out.String())
	require.Empty(t, errb.String())

	out.Reset()
	require.NoError(t, runScenarios(context.Background(), []string{"--list", "--names", "--run", "expiry_*"}, &out, &errb))
	require.Equal(t, "expiry_requeue\nexpiry_single_device\n", out.String())

	err := runScenarios(context.Background(), []string{"--names"}, &out, &errb)
	require.ErrorContains(t, err, "--names only goes with --list")
}
