package store

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/protocol"
)

// TestInvariantTablesCoverTheChecks holds invariantTables to what
// CheckInvariants and the projection read: Audit reuses the checks' last
// result, and reports the projection unchanged, while no row of those
// tables changes, so a table a check or the projection reads but the list
// lacks would let a change there go unchecked. Neither may read a clock,
// or equal rows would not give equal results.
func TestInvariantTablesCoverTheChecks(t *testing.T) {
	var vs []protocol.Violation
	var j journalRows
	reads := invariantReads(&vs, &j)
	require.Len(t, reads, 3, "the SQL checks and the journal's two reads")
	var snap protocol.Snapshot
	var outs []recordedOutput
	projection := append(snapshotReads(&snap), outputsRead(&outs))
	projection = append(projection, (&Scope{}).reads(&snap, mark{})...)
	reads = append(reads, projection...)
	from := regexp.MustCompile(`(?i)\b(?:from|join)\s+([a-z_]+)\b`)
	// Neither IS [NOT] DISTINCT FROM nor a message's text names a table.
	distinct := regexp.MustCompile(`(?i)\bdistinct\s+from\b|'[^']*'`)
	read := map[string]bool{}
	for _, r := range reads {
		for _, m := range from.FindAllStringSubmatch(distinct.ReplaceAllString(r.sql, ""), -1) {
			read[strings.ToLower(m[1])] = true
		}
		for _, clock := range []string{"now(", "current_timestamp", "clock_timestamp", "statement_timestamp", "transaction_timestamp", "random("} {
			require.NotContains(t, strings.ToLower(r.sql), clock, "%s reads a clock or randomness", r.what)
		}
	}
	delete(read, "lateral") // CROSS JOIN LATERAL (...)
	require.NotEmpty(t, read)
	for table := range read {
		require.True(t, slices.Contains(invariantTables[:], table), "the checks or the projection read %s, which invariantTables lacks", table)
	}
	for _, table := range invariantTables {
		require.True(t, read[table], "invariantTables lists %s, which no check reads", table)
	}
}
