package protocol

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// The expected tables are transcribed from SPEC section 2, independently of
// the maps in status.go, so that a drift in either is caught.
var specJobTable = map[string][]string{
	"queued":     {"active", "cancelled", "failed"},
	"active":     {"queued", "verifying", "cancelling", "failed"},
	"verifying":  {"succeeded", "cancelling", "failed"},
	"cancelling": {"cancelled", "failed"},
	"succeeded":  {},
	"cancelled":  {},
	"failed":     {},
}

var specAttemptTable = map[string][]string{
	"leased":      {"downloading", "running", "uploading", "failed", "lost", "cancelled"},
	"downloading": {"running", "uploading", "failed", "lost", "cancelled"},
	"running":     {"uploading", "failed", "lost", "cancelled"},
	"uploading":   {"committing", "failed", "lost", "cancelled"},
	"committing":  {"succeeded", "failed", "cancelled"},
	"succeeded":   {},
	"failed":      {},
	"lost":        {},
	"cancelled":   {},
}

var (
	specJobOrder     = []string{"queued", "active", "verifying", "cancelling", "succeeded", "cancelled", "failed"}
	specAttemptOrder = []string{"leased", "downloading", "running", "uploading", "committing", "succeeded", "failed", "lost", "cancelled"}
	// Strings that are not statuses of either machine, to probe the edges.
	bogusStatuses = []string{"", "bogus", "QUEUED", "Leased", " leased", "active ", "lease", "done"}
)

func allowed(table map[string][]string, from, to string) bool {
	for _, s := range table[from] {
		if s == to {
			return true
		}
	}
	return false
}

func TestStatusListsMatchSpec(t *testing.T) {
	t.Parallel()
	jobs := make([]string, 0, len(JobStatuses))
	for _, s := range JobStatuses {
		jobs = append(jobs, string(s))
	}
	require.Equal(t, specJobOrder, jobs)
	attempts := make([]string, 0, len(AttemptStatuses))
	for _, s := range AttemptStatuses {
		attempts = append(attempts, string(s))
	}
	require.Equal(t, specAttemptOrder, attempts)

	// The named constants carry the contract's spellings.
	require.Equal(t, "queued", string(JobQueued))
	require.Equal(t, "active", string(JobActive))
	require.Equal(t, "verifying", string(JobVerifying))
	require.Equal(t, "cancelling", string(JobCancelling))
	require.Equal(t, "succeeded", string(JobSucceeded))
	require.Equal(t, "cancelled", string(JobCancelled))
	require.Equal(t, "failed", string(JobFailed))
	require.Equal(t, "leased", string(AttemptLeased))
	require.Equal(t, "downloading", string(AttemptDownloading))
	require.Equal(t, "running", string(AttemptRunning))
	require.Equal(t, "uploading", string(AttemptUploading))
	require.Equal(t, "committing", string(AttemptCommitting))
	require.Equal(t, "succeeded", string(AttemptSucceeded))
	require.Equal(t, "failed", string(AttemptFailed))
	require.Equal(t, "lost", string(AttemptLost))
	require.Equal(t, "cancelled", string(AttemptCancelled))

	for _, s := range specJobOrder {
		require.True(t, JobStatus(s).Valid(), s)
	}
	for _, s := range specAttemptOrder {
		require.True(t, AttemptStatus(s).Valid(), s)
	}
	for _, s := range append(append([]string{}, bogusStatuses...), "leased", "committing", "lost") {
		require.False(t, JobStatus(s).Valid(), "job %q", s)
	}
	for _, s := range append(append([]string{}, bogusStatuses...), "queued", "active", "verifying", "cancelling") {
		require.False(t, AttemptStatus(s).Valid(), "attempt %q", s)
	}
}

func TestAssertJobTransitionEveryPair(t *testing.T) {
	t.Parallel()
	all := append(append([]string{}, specJobOrder...), bogusStatuses...)
	accepted := 0
	for _, from := range all {
		for _, to := range all {
			err := AssertJobTransition(JobStatus(from), JobStatus(to))
			if allowed(specJobTable, from, to) {
				require.NoError(t, err, "job %s -> %s is in the SPEC table", from, to)
				accepted++
				continue
			}
			require.Error(t, err, "job %s -> %s is not in the SPEC table", from, to)
			var te *TransitionError
			require.ErrorAs(t, err, &te)
			require.Equal(t, &TransitionError{Entity: "job", From: from, To: to}, te)
		}
	}
	require.Equal(t, 3+4+3+2, accepted)
}

func TestAssertAttemptTransitionEveryPair(t *testing.T) {
	t.Parallel()
	all := append(append([]string{}, specAttemptOrder...), bogusStatuses...)
	accepted := 0
	for _, from := range all {
		for _, to := range all {
			err := AssertAttemptTransition(AttemptStatus(from), AttemptStatus(to))
			if allowed(specAttemptTable, from, to) {
				require.NoError(t, err, "attempt %s -> %s is in the SPEC table", from, to)
				accepted++
				continue
			}
			require.Error(t, err, "attempt %s -> %s is not in the SPEC table", from, to)
			var te *TransitionError
			require.ErrorAs(t, err, &te)
			require.Equal(t, &TransitionError{Entity: "attempt", From: from, To: to}, te)
		}
	}
	require.Equal(t, 6+5+4+4+3, accepted)
}

func TestCancellingToSucceededIsImpossible(t *testing.T) {
	t.Parallel()
	err := AssertJobTransition(JobCancelling, JobSucceeded)
	require.Error(t, err)
	var te *TransitionError
	require.True(t, errors.As(err, &te), "want *TransitionError, got %T", err)
	require.Equal(t, "job", te.Entity)
	require.Equal(t, "cancelling", te.From)
	require.Equal(t, "succeeded", te.To)
	require.Contains(t, err.Error(), "cancelling")
	require.Contains(t, err.Error(), "succeeded")
	require.Equal(t, "illegal job transition cancelling -> succeeded", err.Error())

	// Nor by any detour that stays inside cancelling's reachable set.
	reach := map[JobStatus]bool{JobCancelling: true}
	for changed := true; changed; {
		changed = false
		for from := range reach {
			for _, to := range JobStatuses {
				if !reach[to] && AssertJobTransition(from, to) == nil {
					reach[to] = true
					changed = true
				}
			}
		}
	}
	require.False(t, reach[JobSucceeded], "succeeded reachable from cancelling: %v", reach)
	require.Equal(t, map[JobStatus]bool{JobCancelling: true, JobCancelled: true, JobFailed: true}, reach)
}

func TestTerminalStatusesHaveNoOutboundTransition(t *testing.T) {
	t.Parallel()
	for _, from := range JobStatuses {
		outbound := 0
		for _, to := range JobStatuses {
			if AssertJobTransition(from, to) == nil {
				outbound++
			}
		}
		require.Equal(t, outbound == 0, from.Terminal(), "job %s: %d outbound", from, outbound)
	}
	for _, from := range AttemptStatuses {
		outbound := 0
		for _, to := range AttemptStatuses {
			if AssertAttemptTransition(from, to) == nil {
				outbound++
			}
		}
		require.Equal(t, outbound == 0, from.Terminal(), "attempt %s: %d outbound", from, outbound)
	}
}

func TestJobTerminal(t *testing.T) {
	t.Parallel()
	want := map[string]bool{"succeeded": true, "cancelled": true, "failed": true}
	for _, s := range append(append([]string{}, specJobOrder...), bogusStatuses...) {
		require.Equal(t, want[s], JobStatus(s).Terminal(), "job %q", s)
	}
}

func TestAttemptPredicates(t *testing.T) {
	t.Parallel()
	type row struct {
		live, terminal, leasePhase bool
		rank                       int
	}
	want := map[string]row{
		"leased":      {live: true, leasePhase: true, rank: 1},
		"downloading": {live: true, leasePhase: true, rank: 2},
		"running":     {live: true, leasePhase: true, rank: 3},
		"uploading":   {live: true, leasePhase: true, rank: 4},
		"committing":  {live: true},
		"succeeded":   {terminal: true},
		"failed":      {terminal: true},
		"lost":        {terminal: true},
		"cancelled":   {terminal: true},
	}
	for _, s := range append(append([]string{}, specAttemptOrder...), bogusStatuses...) {
		st := AttemptStatus(s)
		w := want[s] // zero row for unknown strings: nothing holds
		require.Equal(t, w.live, st.Live(), "Live(%q)", s)
		require.Equal(t, w.terminal, st.Terminal(), "Terminal(%q)", s)
		require.Equal(t, w.leasePhase, st.LeasePhase(), "LeasePhase(%q)", s)
		require.Equal(t, w.rank, PhaseRank(st), "PhaseRank(%q)", s)
		if st.Valid() {
			require.NotEqual(t, st.Live(), st.Terminal(), "a valid status is live xor terminal: %q", s)
		}
	}
	// Ranks are strictly increasing in the SPEC's order.
	phases := []AttemptStatus{AttemptLeased, AttemptDownloading, AttemptRunning, AttemptUploading}
	for i := 1; i < len(phases); i++ {
		require.Less(t, PhaseRank(phases[i-1]), PhaseRank(phases[i]))
	}
}

// Lease-phase transitions only move forward in rank, never sideways or back.
func TestLeasePhaseTransitionsMoveForward(t *testing.T) {
	t.Parallel()
	for _, from := range AttemptStatuses {
		for _, to := range AttemptStatuses {
			if !from.LeasePhase() || !to.LeasePhase() {
				continue
			}
			err := AssertAttemptTransition(from, to)
			if PhaseRank(to) > PhaseRank(from) {
				require.NoError(t, err, fmt.Sprintf("%s -> %s", from, to))
			} else {
				require.Error(t, err, fmt.Sprintf("%s -> %s", from, to))
			}
		}
	}
}
