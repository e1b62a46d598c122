package archtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

type listed struct {
	ImportPath   string
	Imports      []string
	Deps         []string
	TestImports  []string
	XTestImports []string
	Error        *struct{ Err string }
}

// goList lists every package of the module under the build tags, as the
// go command sees them (file-level build constraints included).
func goList(t *testing.T, tags string) ([]Package, map[string][]string) {
	t.Helper()
	cmd := exec.Command("go", "list", "-e", "-tags", tags, "-json=ImportPath,Imports,Deps,TestImports,XTestImports,Error", Module+"/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "go list: %s", stderr.String())
	var pkgs []Package
	deps := map[string][]string{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var l listed
		if err := dec.Decode(&l); errors.Is(err, io.EOF) {
			break
		} else {
			require.NoError(t, err)
		}
		require.Nil(t, l.Error, "go list %s", l.ImportPath)
		r, ok := rel(l.ImportPath)
		require.True(t, ok, l.ImportPath)
		pkgs = append(pkgs, Package{Path: r, Imports: l.Imports, TestImports: append(l.TestImports, l.XTestImports...)})
		deps[r] = l.Deps
	}
	require.NotEmpty(t, pkgs)
	return pkgs, deps
}

// TestTheTreeFollowsTheImportTable checks the real tree under each build
// the project makes: the production build and the harness's tagged one.
func TestTheTreeFollowsTheImportTable(t *testing.T) {
	for _, tags := range []string{"", "faultpoints", "faultpoints,mutations"} {
		t.Run("tags="+tags, func(t *testing.T) {
			pkgs, deps := goList(t, tags)
			var bad []string
			bad = append(bad, CheckLayers(pkgs)...)
			bad = append(bad, CheckReach(deps)...)
			bad = append(bad, CheckTestLinks(pkgs)...)
			if len(bad) > 0 {
				t.Fatalf("the import table (internal/archtest/table.go, docs/architecture.md) is broken:\n%s", strings.Join(bad, "\n"))
			}
		})
	}
}

// The checks must fail on the imports they exist to refuse.
func TestInjectedBadImportsAreNamed(t *testing.T) {
	m := func(p string) string { return Module + "/" + p }
	pkgs := []Package{
		{Path: "protocol", Imports: []string{"fmt", "github.com/jackc/pgx/v5"}},
		{Path: "harness/model", Imports: []string{m("protocol"), m("server/fencing")}},
		{Path: "harness/fuzz", Imports: []string{m("harness/model"), m("internal/vcsstamp")}},
		{Path: "harness/bench", Imports: []string{m("harness/scenarios")}},
		{Path: "agent", Imports: []string{m("server/gateway")}},
		{Path: "server/fencing", Imports: []string{m("protocol")}, TestImports: []string{m("harness/loadgen")}},
		{Path: "harness/loadgen", Imports: []string{m("harness/bench")}},
		{Path: "newthing"},
	}
	require.Equal(t, []string{
		"agent imports server/gateway: not allowed (the agent talks to the control plane only through protocol; may import protocol, agent/..., internal/clock, internal/mp4, internal/certpool, internal/loopback, internal/variantset)",
		"harness/bench imports harness/scenarios: not allowed (benchmarks and soaks use the targets and load clients, never the scenario catalogue; may import harness/targets, harness/loadgen, harness/deviceclient, server/..., internal/..., protocol, harness/model, harness/fuzz)",
		"harness/fuzz imports internal/vcsstamp: not allowed (the generator and runner are pure: never pgx, never server; may import protocol, harness/model, internal/provenance)",
		"harness/loadgen imports harness/bench: not allowed (load clients drive the real stack; they know nothing of the model or the catalogue; may import protocol, server/..., internal/..., harness/deviceclient)",
		"harness/model imports server/fencing: not allowed (the model knows only the contract; may import protocol, internal/provenance)",
		"newthing: not in the import table (internal/archtest.Layers): place it in the architecture",
		"protocol imports github.com/jackc/pgx/v5: not allowed (the contract is stdlib only)",
	}, CheckLayers(pkgs))
	require.Equal(t, []string{ // scenarios through bench
		"tests of server/fencing link harness/bench: the control plane's and the agent's tests must not link the harness",
		"tests of server/fencing link harness/loadgen: the control plane's and the agent's tests must not link the harness",
		"tests of server/fencing link harness/scenarios: the control plane's and the agent's tests must not link the harness",
	}, CheckTestLinks(pkgs))
	require.Equal(t, []string{
		"harness/fuzz reaches github.com/rendermac/rendermac/internal/vcsstamp: not allowed (the model and the generator are deterministic: they never run a program (git))",
		"harness/model reaches os/exec: not allowed (the model and the generator are deterministic: they never run a program (git))",
	}, CheckReach(map[string][]string{"harness/model": {"fmt", "os/exec"}, "harness/fuzz": {m("internal/vcsstamp")}, "harness/bench": {"os/exec"}}))
}

// The Docker rule is live: the -tags docker build (make test, make qualify)
// does link testcontainers through internal/pgprovider, and the rule says
// so for the shipped command too; the builds above (no docker tag) pass it.
func TestDockerClientOnlyUnderTheDockerTag(t *testing.T) {
	_, deps := goList(t, "docker")
	bad := strings.Join(CheckReach(deps), "\n")
	for _, pkg := range []string{"internal/pgprovider", "cmd/rendermac"} {
		require.Contains(t, bad, pkg+" reaches github.com/testcontainers/testcontainers-go", "under -tags docker")
	}
	require.NotContains(t, bad, "agent reaches", "the agent never opens a database")
}

// Every entry of the table is an import some package of its row makes, in
// one of the builds the project makes.
func TestEveryAllowedImportIsMade(t *testing.T) {
	var builds []map[int]map[string]bool
	for _, tags := range []string{"", "faultpoints", "faultpoints,mutations", "docker"} {
		pkgs, _ := goList(t, tags)
		builds = append(builds, UsedEntries(pkgs))
	}
	if bad := CheckUnused(builds...); len(bad) > 0 {
		t.Fatalf("the import table (internal/archtest/table.go, docs/architecture.md) allows imports nothing makes:\n%s", strings.Join(bad, "\n"))
	}
}

// The unused-entry check names an entry no build imports, and is content
// with one build's use of it.
func TestAnAllowedImportNothingMakesIsNamed(t *testing.T) {
	m := func(p string) string { return Module + "/" + p }
	i, ok := rowOf("harness/deviceclient")
	require.True(t, ok)
	none := UsedEntries(nil)
	uses := UsedEntries([]Package{{Path: "harness/deviceclient", Imports: []string{m("protocol")}}})
	require.Contains(t, CheckUnused(none), "harness/deviceclient may import protocol, and nothing there does: remove the entry (or the import table is an upper bound, not a picture)")
	require.NotContains(t, strings.Join(CheckUnused(none, uses), "\n"), "harness/deviceclient may import protocol,")
	require.True(t, uses[i]["protocol"])
}
