package evidence

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func sampleCoverage() Coverage {
	return Coverage{
		JobTransitions:     Counts{"queued->active": 3, "active->verifying": 1},
		AttemptTransitions: Counts{"leased->uploading": 2},
		Replies:            Counts{"lease_offer": 3, "lease_conflict/phase_regression": 1},
		Faults:             Counts{"wrong_epoch": 4, "duplicate": 1},
		FaultPhases:        Counts{"wrong_epoch@leased": 3, "wrong_epoch@ended": 1},
		Required: CoverageRequired{JobTransitions: []string{"active->verifying", "queued->active", "verifying->cancelling"},
			AttemptTransitions: []string{"leased->uploading"}, Replies: []string{"lease_conflict/phase_regression", "lease_offer", "no_job"},
			Faults: []string{"duplicate", "stale_token", "wrong_epoch"}},
		Tables: CoverageTables{JobStatuses: []string{"queued", "active", "verifying", "cancelling", "failed"},
			AttemptStatuses:    []string{"leased", "uploading"},
			JobTransitions:     []string{"queued->active", "active->verifying", "verifying->cancelling", "cancelling->failed"},
			AttemptTransitions: []string{"leased->uploading"}, FaultPhases: []string{"leased", "ended"}},
	}
}

func TestCoverageUnreachedNamesEveryMissingCell(t *testing.T) {
	c := sampleCoverage()
	require.Equal(t, []string{"job transition verifying->cancelling", "reply no_job", "fault stale_token"}, c.Unreached())
	f, failed := CoverageFailure("model", c)
	require.True(t, failed)
	require.Equal(t, "coverage: model", f.Source)
	require.Contains(t, f.Detail, "3 required cells never reached: job transition verifying->cancelling, reply no_job, fault stale_token")
	c.JobTransitions["verifying->cancelling"] = 1
	c.Replies["no_job"] = 2
	c.Faults["stale_token"] = 1
	_, failed = CoverageFailure("model", c)
	require.False(t, failed)
}

// Shards of one campaign merge by summing: two halves that each miss a
// cell the other reached add up to full coverage.
func TestCoverageAddSumsShards(t *testing.T) {
	a, b := sampleCoverage(), sampleCoverage()
	b.JobTransitions = Counts{"verifying->cancelling": 2}
	b.Replies = Counts{"no_job": 5}
	b.Faults = Counts{"stale_token": 1, "wrong_epoch": 1}
	var sum Coverage
	sum.Add(a)
	sum.Add(b)
	require.Empty(t, sum.Unreached())
	require.Equal(t, int64(5), sum.Faults["wrong_epoch"])
	require.Equal(t, int64(3), sum.JobTransitions["queued->active"])
	require.Equal(t, a.Required, sum.Required)
}

func TestMarkdownCoverageMatrixMarksUnreached(t *testing.T) {
	cov := sampleCoverage()
	c := Card{Title: "t", Date: "2026-12-03", NoTimings: true,
		Campaigns: []Campaign{{Name: "model", Target: "model", Coverage: &cov}}}
	var md bytes.Buffer
	require.NoError(t, WriteMarkdown(&md, c, WriteOptions{}))
	out := md.String()
	require.Contains(t, out, "### Coverage: model")
	require.Contains(t, out, "**Coverage gate: FAIL.** Never reached: job transition verifying->cancelling, reply no_job, fault stale_token.")
	// verifying row: cancelling required and unreached, the rest not allowed.
	require.Regexp(t, `\| verifying +\| +· \| +· \| +· \| +0 ! \|`, out)
	// cancelling->failed is allowed, not required: a plain 0.
	require.Regexp(t, `\| cancelling +\| +· \| +· \| +· \| +· \| +0 \|`, out)
	require.Regexp(t, `\| wrong_epoch +\| +4 \| +3 \| +1 \|`, out)
	require.Regexp(t, `\| no_job +\| +0 ! \|`, out)
	require.NotContains(t, out, "### Reply codes: model", "a campaign with coverage lists its replies there")

	var html bytes.Buffer
	require.NoError(t, WriteHTML(&html, c, WriteOptions{}))
	require.Contains(t, html.String(), `<td class="num miss">0 !</td>`)
	require.Contains(t, html.String(), "<code>fault stale_token</code>")
}

func TestCoverageJSONRoundTrip(t *testing.T) {
	cov := sampleCoverage()
	cov.FaultPhases = nil
	c := Card{Title: "t", Date: "2026-12-03", NoTimings: true,
		Campaigns: []Campaign{{Name: "model", Target: "model", Coverage: &cov}}}
	var js bytes.Buffer
	require.NoError(t, WriteJSON(&js, c, WriteOptions{}))
	require.Contains(t, js.String(), `"job_transitions": {
          "active->verifying": 1,
          "queued->active": 3
        }`)
	require.Contains(t, js.String(), `"fault_phases": {}`)
	back, err := ReadJSON(strings.NewReader(js.String()))
	require.NoError(t, err)
	var again bytes.Buffer
	require.NoError(t, WriteJSON(&again, back, WriteOptions{}))
	require.Equal(t, js.String(), again.String())
}
