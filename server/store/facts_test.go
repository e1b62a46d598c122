package store_test

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
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
// attempts as the migrations leave them (a migration is frozen SQL, so the
// last Up definition of each counts, and a DROP without a later CREATE
// removes it): since 00007 the two left say store.SQLUnended, which the
// row CHECK of 00001 makes the same rows as "status IN " +
// SQLLiveStatuses (TestUnendedIsLive checks that in the database). The
// unique one is invariant 1 in the database; the other serves statements
// whose WHERE implies its own.
func TestLiveIndexesAreOnTheLiveStatuses(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("migrations/*.sql")
	require.NoError(t, err)
	sort.Strings(files)
	index := regexp.MustCompile(`(?s)(?:CREATE (?:UNIQUE )?INDEX (job_attempts_\w*live\w*) ON job_attempts \([^)]*\)\s+WHERE ([^;]*)|DROP INDEX (job_attempts_\w*live\w*));`)
	last := map[string]string{}
	for _, f := range files {
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		up, _, _ := strings.Cut(string(src), "-- +goose Down")
		for _, m := range index.FindAllStringSubmatch(up, -1) {
			if m[3] != "" {
				delete(last, m[3])
			} else {
				last[m[1]] = m[2]
			}
		}
	}
	require.Equal(t, map[string]string{"job_attempts_one_live_idx": store.SQLUnended,
		"job_attempts_live_device_idx": store.SQLUnended}, last)
}
