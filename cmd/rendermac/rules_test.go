package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/harness/contract"
)

// The trace holds: every rule id a check or a mutant names is in the
// contract, every check contract.Traced names is one qualify runs, and
// every mutant names a rule.
func TestTheRuleTraceHolds(t *testing.T) {
	trace, err := ruleTrace()
	require.NoError(t, err)
	rules, err := contract.Rules()
	require.NoError(t, err)
	require.Len(t, trace, len(rules))
}
