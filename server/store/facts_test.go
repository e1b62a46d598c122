package store_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/store"
)

// sqlList renders statuses as an SQL list, the way protocol names them.
func sqlList(statuses []protocol.AttemptStatus, keep func(protocol.AttemptStatus) bool) string {
	var quoted []string
	for _, s := range statuses {
		if keep(s) {
			quoted = append(quoted, "'"+string(s)+"'")
		}
	}
	return "(" + strings.Join(quoted, ", ") + ")"
}

func TestStatusListsAreProtocols(t *testing.T) {
	t.Parallel()
	require.Equal(t, sqlList(protocol.AttemptStatuses, protocol.AttemptStatus.Live), store.SQLLiveStatuses)
	require.Equal(t, sqlList(protocol.AttemptStatuses, protocol.AttemptStatus.LeasePhase), store.SQLLeasePhases)
}

// TestPhaseRanksArePhaseRank checks array_position over SQLPhaseRanks
// against protocol.PhaseRank for every attempt status: the same rank for a
// lease phase, absent (NULL, which the statements read as 0) otherwise.
func TestPhaseRanksArePhaseRank(t *testing.T) {
	t.Parallel()
	m := regexp.MustCompile(`^'\{([a-z,]+)\}'::text\[\]$`).FindStringSubmatch(store.SQLPhaseRanks)
	require.NotNil(t, m, "SQLPhaseRanks is a text array literal: %s", store.SQLPhaseRanks)
	ranks := map[protocol.AttemptStatus]int{}
	for i, s := range strings.Split(m[1], ",") {
		ranks[protocol.AttemptStatus(s)] = i + 1
	}
	for _, s := range protocol.AttemptStatuses {
		require.Equal(t, protocol.PhaseRank(s), ranks[s], "rank of %s", s)
	}
	require.Len(t, ranks, 4)
}

// TestLiveIndexesAreOnTheLiveStatuses checks the partial indexes on live
// attempts, which the migrations write out in full (a migration is frozen
// SQL), against SQLLiveStatuses: the unique one is invariant 1 in the
// database, and the others only serve statements whose WHERE implies
// theirs.
func TestLiveIndexesAreOnTheLiveStatuses(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("migrations/*.sql")
	require.NoError(t, err)
	index := regexp.MustCompile(`(?s)CREATE (?:UNIQUE )?INDEX (job_attempts_\w*live\w*) ON job_attempts \([^)]*\)\s+WHERE ([^;]*);`)
	found := 0
	for _, f := range files {
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, m := range index.FindAllStringSubmatch(string(src), -1) {
			found++
			require.Equal(t, "status IN "+store.SQLLiveStatuses, m[2], "%s: index %s", f, m[1])
		}
	}
	require.Equal(t, 3, found, "the live partial indexes of 00001_init.sql")
}
