package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"

	"github.com/rendermac/rendermac/internal/shard"
)

// ciWorkflow is the part of a GitHub Actions workflow the example uses;
// decoding is strict, so a misspelt key fails the test.
type ciWorkflow struct {
	Name string         `yaml:"name"`
	On   map[string]any `yaml:"on"`
	Jobs map[string]struct {
		Name     string `yaml:"name"`
		RunsOn   string `yaml:"runs-on"`
		Needs    any    `yaml:"needs"`
		If       string `yaml:"if"`
		Strategy struct {
			FailFast *bool            `yaml:"fail-fast"`
			Matrix   map[string][]any `yaml:"matrix"`
		} `yaml:"strategy"`
		Steps []struct {
			Name string            `yaml:"name"`
			Uses string            `yaml:"uses"`
			Run  string            `yaml:"run"`
			If   string            `yaml:"if"`
			With map[string]string `yaml:"with"`
		} `yaml:"steps"`
	} `yaml:"jobs"`
}

var ciExpr = regexp.MustCompile(`\$\{\{\s*(.*?)\s*\}\}`)

// docs/ci-matrix.yml runs only commands the CLI accepts: every rendermac
// call parses with the command's own flag parser, the shards of the matrix
// are exactly 1/N..N/N of one qualify command, and the merge job merges
// after them.
func TestCIMatrixExample(t *testing.T) {
	data, err := os.ReadFile("../../docs/ci-matrix.yml")
	require.NoError(t, err)
	var wf ciWorkflow
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	require.NoError(t, dec.Decode(&wf))

	var shards []shard.Spec
	var shardCommands []string
	merges := 0
	for jobName, job := range wf.Jobs {
		values := job.Strategy.Matrix["shard"]
		for key := range job.Strategy.Matrix {
			require.Equal(t, "shard", key, "job %s: the test knows only the shard matrix key", jobName)
		}
		if len(values) == 0 {
			values = []any{nil} // no matrix: the steps run once
		}
		for _, v := range values {
			for _, step := range job.Steps {
				if strings.HasPrefix(step.Uses, "actions/upload-artifact") && len(job.Strategy.Matrix) > 0 {
					require.Contains(t, step.With["name"], "${{ matrix.shard }}", "job %s: each shard needs its own artifact name", jobName)
				}
				if step.Run == "" {
					continue
				}
				script := ciExpr.ReplaceAllStringFunc(step.Run, func(m string) string {
					expr := ciExpr.FindStringSubmatch(m)[1]
					require.Equal(t, "matrix.shard", expr, "job %s step %q: the test cannot check ${{ %s }}", jobName, step.Name, expr)
					return toString(v)
				})
				for _, call := range shellCalls(t, script) {
					sub, args, tags := rendermacCall(t, call)
					switch {
					case sub == "":
						continue
					case sub == "qualify":
						f, err := parseQualifyFlags(args, io.Discard)
						require.NoError(t, err, "job %s: %v", jobName, call)
						require.Contains(t, tags, "faultpoints", "job %s: qualify runs the scenarios, which need -tags faultpoints", jobName)
						require.False(t, f.NoTimings, "job %s: CI cards should keep their timings", jobName)
						if f.Shard.Sharded() {
							shards = append(shards, f.Shard)
							shardCommands = append(shardCommands, recordedCommand("qualify", args))
						}
					case sub == "card" && len(args) > 0 && args[0] == "merge":
						_, paths, err := parseCardMergeFlags(args[1:], io.Discard)
						require.NoError(t, err, "job %s: %v", jobName, call)
						for _, p := range paths {
							require.True(t, strings.HasSuffix(p, ".json"), "card merge reads JSON cards, not %s", p)
						}
						require.Contains(t, toStrings(job.Needs), "shard", "job %s merges before the shards ran", jobName)
						merges++
					default:
						t.Fatalf("job %s runs rendermac %s %v: teach this test to parse it", jobName, sub, args)
					}
				}
			}
		}
	}
	require.NotEmpty(t, shards, "no qualify --shard in the workflow")
	n := shards[0].N
	var ks []int
	for _, s := range shards {
		require.Equal(t, n, s.N, "every shard has the same N")
		ks = append(ks, s.K)
	}
	slices.Sort(ks)
	want := make([]int, n)
	for i := range want {
		want[i] = i + 1
	}
	require.Equal(t, want, ks, "the matrix runs shards 1..%d, each once", n)
	for _, c := range shardCommands {
		require.Equal(t, shardCommands[0], c, "card merge refuses shards of different commands")
	}
	require.Equal(t, 1, merges, "one card merge")
}

// shellCalls returns every simple command of script, its words expanded
// as the shell would (quotes removed; globs left as written).
func shellCalls(t *testing.T, script string) [][]string {
	t.Helper()
	file, err := syntax.NewParser().Parse(strings.NewReader(script), "run")
	require.NoError(t, err, script)
	var calls [][]string
	syntax.Walk(file, func(n syntax.Node) bool {
		call, ok := n.(*syntax.CallExpr)
		if !ok {
			return true
		}
		var words []string
		for _, w := range call.Args {
			s, err := expand.Literal(nil, w)
			require.NoError(t, err)
			words = append(words, s)
		}
		calls = append(calls, words)
		return true
	})
	return calls
}

// rendermacCall recognises `go run [-tags T] ./cmd/rendermac SUB ARGS` and
// `.../rendermac SUB ARGS`; sub is "" for any other command.
func rendermacCall(t *testing.T, call []string) (sub string, args, tags []string) {
	t.Helper()
	rest := call
	switch {
	case len(call) >= 2 && call[0] == "go" && call[1] == "run":
		rest = call[2:]
		for len(rest) > 0 && strings.HasPrefix(rest[0], "-") {
			name, value, hasValue := strings.Cut(strings.TrimLeft(rest[0], "-"), "=")
			require.Equal(t, "tags", name, "go run flag %s: the test knows only -tags", rest[0])
			if !hasValue {
				require.Greater(t, len(rest), 1, "-tags without a value")
				value, rest = rest[1], rest[1:]
			}
			tags = strings.Split(value, ",")
			for _, tag := range tags {
				require.Contains(t, []string{"faultpoints", "mutations"}, tag, "unknown build tag")
			}
			rest = rest[1:]
		}
		if len(rest) == 0 || rest[0] != "./cmd/rendermac" {
			return "", nil, nil
		}
	case len(call) >= 1 && strings.HasSuffix(call[0], "rendermac"):
	default:
		return "", nil, nil
	}
	require.Greater(t, len(rest), 1, "rendermac without a command: %v", call)
	sub = rest[1]
	known := false
	for _, c := range commands() {
		known = known || c.name == sub
	}
	require.True(t, known, "rendermac has no command %q", sub)
	return sub, rest[2:], tags
}

// toString renders a matrix value as the runner substitutes it.
func toString(v any) string {
	if v == nil {
		return ""
	}
	return fmt.Sprint(v)
}

func toStrings(v any) []string {
	switch x := v.(type) {
	case string:
		return []string{x}
	case []any:
		var out []string
		for _, e := range x {
			out = append(out, toString(e))
		}
		return out
	}
	return nil
}
