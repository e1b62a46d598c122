//go:build faultpoints && mutations

package main

import (
	"flag"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// cliDoc is docs/cli.md, written from the commands' own usage: the
// reference cannot drift from the binary.
const cliDoc = "../../docs/cli.md"

// regenerateCLIDoc is the command that rewrites cliDoc.
const regenerateCLIDoc = "go test -tags faultpoints,mutations ./cmd/rendermac/ -run TestCLIReferenceIsCurrent -update"

var updateCLIDoc = flag.Bool("update", false, "rewrite docs/cli.md from the commands' --help")

// cliReference renders docs/cli.md: `rendermac help`, then every command's
// --help in the help's order, with each subcommand's after its command.
// It describes the harness build (make test's and make qualify's tags);
// the shipped build lacks the broken variants some flags list.
func cliReference(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("# The rendermac command line\n\n")
	b.WriteString("<!-- Generated from the commands' own --help; do not edit. Regenerate with:\n     " + regenerateCLIDoc + " -->\n\n")
	b.WriteString("One binary, `rendermac`, is the control plane, the Mac agent and the harness. Every command has `--help` " +
		"(also `rendermac help COMMAND`), printed on stdout with exit status 0; a bad flag or argument exits 2, a failed " +
		"run 1. This page is the usage of the harness build (`-tags faultpoints,mutations`, as `make test` and " +
		"`make qualify` build it); the shipped build (`make build`) has the same commands and flags but no broken " +
		"variants to name. What the commands do, at length: [operators.md](operators.md) for the control plane and " +
		"the agent, [harness.md](harness.md) for the harness.\n\n")
	section := func(title string, args ...string) {
		code, stdout, stderr := cli(t, args...)
		require.Equal(t, 0, code, "rendermac %s: %s", strings.Join(args, " "), stderr)
		fmt.Fprintf(&b, "## %s\n\n```\n%s```\n\n", title, stdout)
	}
	section("rendermac help", "help")
	for _, g := range helpGroups {
		for _, name := range g.names {
			section("rendermac "+name, name, "--help")
			switch name {
			case "admin":
				for _, c := range adminCommands() {
					section("rendermac admin "+c.name, "admin", c.name, "--help")
				}
			case "jobs":
				for _, c := range jobsCommands() {
					section("rendermac jobs "+c.name, "jobs", c.name, "--help")
				}
			case "card":
				section("rendermac card merge", "card", "merge", "--help")
			case "agent":
				b.WriteString("`rendermac agent install` takes the agent's flags above.\n\n")
				for _, sub := range agentServiceCommands[1:] {
					section("rendermac agent "+sub, "agent", sub, "--help")
				}
			}
		}
	}
	return strings.TrimRight(b.String(), "\n") + "\n"
}

// docs/cli.md is the commands' own usage, current: a flag added, renamed
// or reworded without regenerating it fails here with the command that
// does. The usage is rendered with the environment's RENDERMAC_*, AWS_*
// and DATABASE_URL cleared, since some flags take their defaults there.
func TestCLIReferenceIsCurrent(t *testing.T) {
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "RENDERMAC_") || strings.HasPrefix(k, "AWS_") || k == "DATABASE_URL" {
			t.Setenv(k, "")
		}
	}
	got := cliReference(t)
	if *updateCLIDoc {
		require.NoError(t, os.WriteFile(cliDoc, []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile(cliDoc)
	require.NoError(t, err, "docs/cli.md is missing; write it with: %s", regenerateCLIDoc)
	require.True(t, string(want) == got, "docs/cli.md is not the commands' current --help; regenerate it with:\n  %s", regenerateCLIDoc)
}

// flagLine is a flag's first line in a usage: "  -name" and at most one
// word naming its value. The flag package takes a usage's first
// back-quoted text as that name, so a usage quoting a command in
// backquotes prints "-postgres apt-get install patroni etcd-server".
var flagLine = regexp.MustCompile(`^  -[a-z0-9-]+( [^ ]+)?$`)

// Every flag's first line names the flag and at most a one-word value:
// no usage text back-quotes a phrase the flag package would print as the
// value's name.
func TestCLIFlagValueNamesAreOneWord(t *testing.T) {
	var bad []string
	for _, line := range strings.Split(cliReference(t), "\n") {
		if strings.HasPrefix(line, "  -") && !flagLine.MatchString(line) {
			bad = append(bad, line)
		}
	}
	require.Empty(t, bad, "flags whose usage back-quotes a phrase (the flag package prints it as the value's name): drop the backquotes")
}
