package mutate

import (
	"slices"
	"strings"
	"testing"
)

func TestFocusedArgsKeepsOnlyTheChecksThatReachTheRules(t *testing.T) {
	base := []string{"--seeds", "100", "--pg-seeds", "20", "--stack-seeds", "5", "--no-fleet"}
	cases := []struct {
		name   string
		checks []string
		want   string
	}{
		{"nothing reaches it", nil,
			"--pg-seeds 0 --stack-seeds 0 --no-scenarios --s3-scenarios="},
		{"the Postgres campaign and a scenario", []string{"campaign:model-vs-postgres", "scenario:a", "contract:x"},
			"--stack-seeds 0 --scenarios a --s3-scenarios="},
		{"the token check reads every campaign", []string{"campaign-tokens"},
			"--no-scenarios --s3-scenarios="},
		{"a scenario and its S3 run", []string{"campaign:model-vs-postgres-vs-stack", "scenario:a", "scenario:a@s3", "scenario:b"},
			"--pg-seeds 0 --scenarios a,b --s3-scenarios=a"},
		{"only an S3 run still runs its scenario", []string{"scenario:a@s3"},
			"--pg-seeds 0 --stack-seeds 0 --scenarios a --s3-scenarios=a"},
	}
	for _, c := range cases {
		got := FocusedArgs(base, c.checks)
		if !slices.Equal(got[:len(base)], base) {
			t.Errorf("%s: the bounded gate's flags changed: %q", c.name, got)
		}
		if extra := strings.Join(got[len(base):], " "); extra != c.want {
			t.Errorf("%s: appended %q, want %q", c.name, extra, c.want)
		}
	}
	narrowed := append(slices.Clone(base), "--scenarios", "x")
	if got := FocusedArgs(narrowed, []string{"scenario:a"}); slices.Contains(got, "a") || slices.Contains(got, "--no-scenarios") {
		t.Errorf("a gate that chose its scenarios lost its choice: %q", got)
	}
}
