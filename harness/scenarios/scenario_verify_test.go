package scenarios

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/protocol"
)

const verifyHeader = "name: x\nfault: f\nphase: p\nexpect: e\nproposed: none\n"

// The headers of verification scenarios: a catalogue that exists, an
// ffprobe timeout that is one; asking for ffprobe makes the scenario need it.
func TestVerifyHeaders(t *testing.T) {
	t.Parallel()
	s, err := parseScenario("testdata/scenarios/99_x.txt", verifyHeader+"catalogue: verify\nffprobe: 2s\nreached counter c\n")
	require.NoError(t, err)
	require.Equal(t, "verify", s.catalogue)
	require.Contains(t, s.Needs, NeedFFprobe)
	_, err = parseScenario("testdata/scenarios/99_x.txt", verifyHeader+"catalogue: nope\nreached counter c\n")
	require.ErrorContains(t, err, "catalogue")
	_, err = parseScenario("testdata/scenarios/99_x.txt", verifyHeader+"ffprobe: 0s\nreached counter c\n")
	require.ErrorContains(t, err, "ffprobe: want a timeout")
}

// Without ffprobe a scenario that runs it is not run (and says why),
// except under CI, where it runs and fails.
func TestVerifyScenarioNeedsFFprobe(t *testing.T) {
	s, err := parseScenario("testdata/scenarios/99_x.txt", verifyHeader+"ffprobe: 2s\nreached counter c\n")
	require.NoError(t, err)
	t.Setenv("PATH", t.TempDir())
	t.Setenv("CI", "")
	require.ErrorIs(t, s.Runnable(), ErrNeedsFFprobe)
	t.Setenv("CI", "true")
	require.NoError(t, s.Runnable())
}

// Every catalogue the scripts load parses as the scripts expect: the one
// the stacks run on is taken, and the refusal cases are JSON objects.
func TestVerifyCatalogues(t *testing.T) {
	t.Parallel()
	data, err := catalogueFile("verify")
	require.NoError(t, err)
	cat, err := protocol.ParseCatalogue(data)
	require.NoError(t, err)
	_, ok := protocol.FindService(cat, "verify.h264")
	require.True(t, ok)
	_, err = catalogueFile("cases#no_such_case")
	require.ErrorContains(t, err, "no case")
	for name := range scMedia {
		b, err := mediaFile(name)
		require.NoError(t, err)
		require.NotEmpty(t, b)
	}
}

// A refusal is held to every word of the outcome: the index, service and
// field the error names, and the words its message holds.
func TestCheckCatalogueOutcome(t *testing.T) {
	t.Parallel()
	refusal := &protocol.CatalogueError{Index: 0, Service: "a.b", Field: "runner.codec", Reason: `want h264 or hevc, got "vp9"`}
	got := "refused: " + refusal.Error()
	require.NoError(t, checkCatalogueOutcome([]string{"refused", "index=0", "service=a.b", "field=runner.codec", "has=vp9"}, got, refusal))
	require.Error(t, checkCatalogueOutcome([]string{"refused", "field=runner.width"}, got, refusal))
	require.Error(t, checkCatalogueOutcome([]string{"refused", "has=av1"}, got, refusal))
	require.Error(t, checkCatalogueOutcome([]string{"ok"}, got, refusal))
	require.Error(t, checkCatalogueOutcome([]string{"refused"}, "ok services=1", nil))
	require.NoError(t, checkCatalogueOutcome([]string{"ok", "services=1"}, "ok services=1", nil))
	// A plain error (the agent's) matches has= only.
	plain := errors.New(`service "x.y" is not in the catalogue`)
	require.NoError(t, checkCatalogueOutcome([]string{"refused", "has=x.y"}, "refused: "+plain.Error(), plain))
	require.Error(t, checkCatalogueOutcome([]string{"refused", "service=x.y"}, "refused: "+plain.Error(), plain))
}
