package main

import (
	"bytes"
	"runtime/debug"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// cli runs rendermac with args in process and returns its exit code,
// stdout and stderr.
func cli(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(t.Context(), args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// helpInvocations are every command and subcommand that has a usage of
// its own.
func helpInvocations() [][]string {
	var out [][]string
	for _, c := range commands() {
		out = append(out, []string{c.name})
	}
	for _, c := range adminCommands() {
		out = append(out, []string{"admin", c.name})
	}
	for _, c := range jobsCommands() {
		out = append(out, []string{"jobs", c.name})
	}
	out = append(out, []string{"card", "diff"}, []string{"card", "merge"})
	for _, sub := range agentServiceCommands {
		out = append(out, []string{"agent", sub})
	}
	return out
}

// Every --help (and -h, and `rendermac help CMD`) prints the usage on
// stdout and exits 0, as the tools people know do: `rendermac x --help |
// less` works.
func TestEveryHelpIsOnStdoutWithExitZero(t *testing.T) {
	t.Parallel()
	for _, inv := range helpInvocations() {
		for _, h := range []string{"--help", "-h"} {
			args := append(slices.Clone(inv), h)
			code, stdout, stderr := cli(t, args...)
			require.Equal(t, 0, code, "rendermac %s: exit status (stderr %q)", strings.Join(args, " "), stderr)
			require.Empty(t, stderr, "rendermac %s writes its usage on stdout only", strings.Join(args, " "))
			require.True(t, strings.HasPrefix(stdout, "Usage: rendermac "), "rendermac %s: stdout %q", strings.Join(args, " "), stdout)
		}
		_, want, _ := cli(t, append(slices.Clone(inv), "--help")...)
		code, got, _ := cli(t, append([]string{"help"}, inv...)...)
		require.Equal(t, 0, code)
		require.Equal(t, want, got, "rendermac help %s is rendermac %[1]s --help", strings.Join(inv, " "))
	}
}

// A flag a command does not know is reported once, on stderr, with where
// to find the usage, and exit status 2; not the flag package's message
// followed by the whole usage and the message again.
func TestUnknownFlagIsReportedOnce(t *testing.T) {
	t.Parallel()
	for _, inv := range helpInvocations() {
		if inv[0] == "agent" && len(inv) > 1 || inv[0] == "card" || slices.Equal(inv, []string{"admin"}) || slices.Equal(inv, []string{"jobs"}) {
			continue // launchd's commands exist on macOS only; card, admin and jobs dispatch to subcommands (below, above)
		}
		args := append(slices.Clone(inv), "--no-such-flag")
		code, stdout, stderr := cli(t, args...)
		name := strings.Join(args, " ")
		require.Equal(t, 2, code, "rendermac %s (stderr %q)", name, stderr)
		require.Empty(t, stdout, "rendermac %s", name)
		if slices.Equal(inv, []string{"admin", "gen-key"}) {
			require.Equal(t, 1, strings.Count(stderr, "gen-key takes exactly one argument"), "rendermac %s: %q", name, stderr)
		} else {
			require.Equal(t, 1, strings.Count(stderr, "flag provided but not defined: -no-such-flag"), "rendermac %s: %q", name, stderr)
		}
		require.NotContains(t, stderr, "Flags:", "rendermac %s prints no usage on a bad flag, only where to find it", name)
		require.Contains(t, stderr, "--help' for usage", "rendermac %s", name)
	}
	code, _, stderr := cli(t, "card", "merge", "--no-such-flag")
	require.Equal(t, 2, code)
	require.Equal(t, 1, strings.Count(stderr, "flag provided but not defined"), stderr)
}

// `rendermac help` lists an operator's commands first, then the harness's,
// and every command is in exactly one group.
func TestHelpGroupsEveryCommand(t *testing.T) {
	t.Parallel()
	seen := map[string]int{}
	for _, g := range helpGroups {
		for _, n := range g.names {
			seen[n]++
		}
	}
	for _, c := range commands() {
		require.Equal(t, 1, seen[c.name], "command %s must be in exactly one of helpGroups (main.go)", c.name)
		delete(seen, c.name)
	}
	require.Empty(t, seen, "helpGroups names commands that do not exist")

	code, stdout, _ := cli(t, "help")
	require.Equal(t, 0, code)
	order := []string{"Run a farm:", "  server ", "  agent ", "  dev ", "  admin ", "  migrate ",
		"Prove it (the harness):", "  qualify ", "  fuzz ", "  scenarios ", "  rules ", "  mutate ", "  replay ",
		"  card ", "  bench ", "  soak ", "  fleet ", "  version "}
	at := 0
	for _, want := range order {
		i := strings.Index(stdout[at:], want)
		require.GreaterOrEqual(t, i, 0, "%q after position %d of:\n%s", want, at, stdout)
		at += i + len(want)
	}
}

// `rendermac version` and `rendermac --version` say the module version,
// the commit and the build tags.
func TestVersion(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"version"}, {"--version"}} {
		code, stdout, stderr := cli(t, args...)
		require.Equal(t, 0, code, stderr)
		require.Regexp(t, `^rendermac \S+\ncommit     [0-9a-f]{40}( \(with uncommitted changes\))?\nbuild tags .+\ngo         go`, stdout)
	}
	bi := &debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}, Settings: []debug.BuildSetting{{Key: "-tags", Value: "faultpoints,mutations"}}}
	out := versionText(bi, "abc", true)
	require.Contains(t, out, "rendermac v1.2.3\n")
	require.Contains(t, out, "commit     abc (with uncommitted changes)\n")
	require.Contains(t, out, "build tags faultpoints,mutations\n")
	bi.Settings = nil
	require.Contains(t, versionText(bi, "abc", false), "build tags none (the shipped build")
}
