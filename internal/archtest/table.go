package archtest

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Module is the import path prefix of the project's packages.
const Module = "github.com/rendermac/rendermac"

// Layer is one row of the import table: the packages Pkgs (relative to
// Module; "x/..." is x and everything below it) may import only the project
// packages May. Stdlib and third-party imports are governed by NoReach.
type Layer struct {
	Pkgs []string
	May  []string
	Why  string
	// Tests makes the row govern its packages' test imports too: a
	// package of tests alone (harness/e2e) imports nothing otherwise.
	Tests bool
}

// Reach forbids packages Pkgs from depending, directly or not, on any
// package matching Deps (full import paths; "x/..." is a subtree).
type Reach struct {
	Pkgs []string
	Deps []string
	Why  string
}

// Package is what the checks need of `go list -json`: relative path, the
// project and external packages it imports, and (for the linking rule) the
// imports of its tests.
type Package struct {
	Path        string // relative to Module ("" for the module root)
	Imports     []string
	TestImports []string // TestImports and XTestImports together
}

// Product is what ships: the control plane, the agent, the contract they
// share and the leaves they link. The first rule of the table: nothing in
// it imports the harness.
var Product = []string{"protocol", "server/...", "agent", "agent/...", "docs"}

// Layers is the import table (docs/architecture.md).
var Layers = []Layer{
	// The product.
	{Pkgs: []string{"protocol"}, Why: "the contract is stdlib only"},
	{Pkgs: []string{"internal/..."}, May: []string{"internal/..."}, Why: "internal packages are leaves under the project"},
	{Pkgs: []string{"docs"}, Why: "the contract's text, embedded: stdlib only"},
	{Pkgs: []string{"server/..."}, May: []string{"protocol", "server/...", "internal/clock", "internal/dbstat", "internal/mp4", "internal/certpool", "internal/loopback", "internal/variantset"},
		Why: "the control plane never imports the model or the harness"},
	{Pkgs: []string{"agent/...", "agent"}, May: []string{"protocol", "agent/...", "internal/clock", "internal/mp4", "internal/certpool", "internal/loopback", "internal/variantset"},
		Why: "the agent talks to the control plane only through protocol"},
	// The harness.
	{Pkgs: []string{"harness/contract"}, May: []string{"protocol", "docs"}, Why: "protocol's tables checked against the contract's text"},
	{Pkgs: []string{"harness/model"}, May: []string{"protocol", "internal/provenance"}, Why: "the model knows only the contract"},
	{Pkgs: []string{"harness/fuzz"}, May: []string{"protocol", "harness/model", "internal/provenance"}, Why: "the generator and runner are pure: never pgx, never server"},
	{Pkgs: []string{"harness/conformance"}, May: []string{"protocol", "harness/fuzz"}, Why: "one suite every Target implementation runs"},
	{Pkgs: []string{"harness/evidence"}, May: []string{"internal/provenance", "internal/shard"}, Why: "callers convert their results into the card's types"},
	{Pkgs: []string{"harness/deviceclient"}, May: []string{"protocol"}, Why: "a device's side of the wire protocol, frame by frame"},
	{Pkgs: []string{"harness/testca"}, Why: "the harness's certificate authority: crypto/x509 alone"},
	{Pkgs: []string{"harness/loadgen"}, May: []string{"protocol", "server/...", "internal/...", "harness/deviceclient"},
		Why: "load clients drive the real stack; they know nothing of the model or the catalogue"},
	{Pkgs: []string{"harness/targets"}, May: []string{"server/...", "internal/...", "harness/loadgen", "harness/deviceclient", "protocol", "harness/model", "harness/fuzz"},
		Why: "the Postgres and full-stack targets"},
	{Pkgs: []string{"harness/linearize"}, May: []string{"harness/targets", "protocol", "harness/model", "harness/fuzz"},
		Why: "the porcupine check over the targets"},
	{Pkgs: []string{"harness/scenarios"}, May: []string{"harness/targets", "server/...", "internal/...", "harness/evidence", "harness/loadgen", "harness/deviceclient", "agent", "agent/...", "harness/testca", "protocol"},
		Why: "the phase-fault catalogue runs on the targets, and runs the shipped agent in process so that qualify checks its rules on the wire"},
	{Pkgs: []string{"harness/bench", "harness/soak"}, May: []string{"harness/targets", "harness/loadgen", "harness/deviceclient", "server/...", "internal/...", "protocol", "harness/model", "harness/fuzz"},
		Why: "benchmarks and soaks use the targets and load clients, never the scenario catalogue"},
	{Pkgs: []string{"harness/fleet"}, May: []string{"harness/targets", "harness/loadgen", "harness/soak", "agent", "server/...", "internal/...", "harness/testca", "protocol"},
		Why: "the fleet run drives the shipped binaries and reuses the soak's checks; it imports the agent only for its stated bounds"},
	{Pkgs: []string{"harness/mutate"}, May: []string{"harness/evidence"}, Why: "the mutation campaign edits copies of the tree and runs the CLI"},
	{Pkgs: []string{"harness/e2e"}, May: []string{"..."}, Tests: true, Why: "end-to-end tests of the shipped binaries"},
	{Pkgs: []string{"cmd/..."}, May: []string{"..."}, Why: "main packages wire everything"},
}

// Reaches are the transitive rules.
var Reaches = []Reach{
	{Pkgs: []string{"protocol", "harness/model", "harness/fuzz", "harness/conformance"}, Deps: []string{"os/exec", Module + "/internal/vcsstamp"},
		Why: "the model and the generator are deterministic: they never run a program (git)"},
	{Pkgs: []string{"protocol", "harness/model", "harness/fuzz"}, Deps: []string{"github.com/jackc/pgx/v5/...", "net/http"},
		Why: "the pure core does no I/O"},
	{Pkgs: []string{"harness/conformance"}, Deps: []string{"github.com/jackc/pgx/v5/...", Module + "/server/..."},
		Why: "the conformance suite knows targets only as fuzz.Target (testify brings net/http, nothing more)"},
	{Pkgs: []string{"protocol", "harness/model", "harness/fuzz", "harness/conformance", "agent", "agent/..."}, Deps: []string{"github.com/aws/..."},
		Why: "only the control plane's artifact store speaks S3; the agent follows presigned URLs with plain HTTP"},
	{Pkgs: Product, Deps: []string{Module + "/cmd/...", Module + "/harness/..."},
		Why: "the product never imports the harness (nor cmd)"},
	{Pkgs: []string{"..."}, Deps: DockerDeps,
		Why: "the shipped binary does not link the harness's Docker client: only a -tags docker build (make test, make qualify) does"},
}

// DockerDeps are testcontainers and what it brings (the Docker client,
// gopsutil, logrus): only internal/pgprovider's -tags docker file links them.
var DockerDeps = []string{"github.com/testcontainers/testcontainers-go/...", "github.com/moby/...",
	"github.com/docker/...", "github.com/shirou/gopsutil/...", "github.com/sirupsen/logrus"}

// Harness is what the control plane's and the agent's tests must not link.
var Harness = []string{"harness/..."}

// TestClients are the harness packages the product's tests may link: the
// device's side of the wire protocol (it imports protocol alone), which a
// gateway test needs as a peer.
var TestClients = []string{"harness/deviceclient"}

func match(pattern, path string) bool {
	switch {
	case pattern == "...":
		return true
	case strings.HasSuffix(pattern, "/..."):
		base := strings.TrimSuffix(pattern, "/...")
		return path == base || strings.HasPrefix(path, base+"/")
	default:
		return pattern == path
	}
}

func matchAny(patterns []string, path string) bool {
	return slices.ContainsFunc(patterns, func(p string) bool { return match(p, path) })
}

// layerOf returns the most specific layer naming pkg: an exact name beats a
// subtree, a longer subtree beats a shorter one.
func layerOf(pkg string) (Layer, bool) {
	i, ok := rowOf(pkg)
	if !ok {
		return Layer{}, false
	}
	return Layers[i], true
}

// rel returns the path of a project package relative to Module, or false.
func rel(importPath string) (string, bool) {
	if importPath == Module {
		return "", true
	}
	r, ok := strings.CutPrefix(importPath, Module+"/")
	return r, ok
}

// CheckLayers returns one line per import the table forbids and per
// project package the table does not place.
func CheckLayers(pkgs []Package) []string {
	var out []string
	for _, p := range pkgs {
		l, ok := layerOf(p.Path)
		if !ok {
			out = append(out, fmt.Sprintf("%s: not in the import table (internal/archtest.Layers): place it in the architecture", p.Path))
			continue
		}
		imports := p.Imports
		if l.Tests {
			imports = append(slices.Clone(p.Imports), p.TestImports...)
		}
		for _, imp := range imports {
			r, ok := rel(imp)
			if !ok || r == p.Path {
				continue
			}
			if !matchAny(l.May, r) {
				out = append(out, fmt.Sprintf("%s imports %s: not allowed (%s; may import %s)", p.Path, r, l.Why, strings.Join(l.May, ", ")))
			}
		}
		if match("protocol", p.Path) {
			for _, imp := range p.Imports {
				if first, _, _ := strings.Cut(imp, "/"); strings.Contains(first, ".") {
					out = append(out, fmt.Sprintf("protocol imports %s: not allowed (%s)", imp, l.Why))
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

// closure returns every package reachable from roots through the imports
// of the packages in graph (full import paths; packages outside graph, the
// stdlib and third party, are included but not followed).
func closure(graph map[string][]string, roots []string) map[string]bool {
	seen := map[string]bool{}
	stack := slices.Clone(roots)
	for len(stack) > 0 {
		p := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[p] {
			continue
		}
		seen[p] = true
		stack = append(stack, graph[p]...)
	}
	return seen
}

// CheckReach returns one line per forbidden transitive dependency, given
// the full dependency list of each package (go list's Deps).
func CheckReach(deps map[string][]string) []string {
	var out []string
	for _, r := range Reaches {
		for pkg, ds := range deps {
			if !matchAny(r.Pkgs, pkg) {
				continue
			}
			// One line per forbidden pattern, naming the first dependency
			// under it: pgx alone has a dozen packages.
			for _, pat := range r.Deps {
				for _, d := range ds {
					if match(pat, d) {
						out = append(out, fmt.Sprintf("%s reaches %s: not allowed (%s)", pkg, d, r.Why))
						break
					}
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

// CheckTestLinks returns one line per harness package linked into the
// tests of a server or agent package.
func CheckTestLinks(pkgs []Package) []string {
	graph := map[string][]string{}
	for _, p := range pkgs {
		graph[Module+"/"+p.Path] = p.Imports
	}
	var out []string
	for _, p := range pkgs {
		if !matchAny(Product, p.Path) {
			continue
		}
		roots := append(slices.Clone(p.Imports), p.TestImports...)
		for d := range closure(graph, roots) {
			if r, ok := rel(d); ok && matchAny(Harness, r) && !matchAny(TestClients, r) {
				out = append(out, fmt.Sprintf("tests of %s link %s: the control plane's and the agent's tests must not link the harness", p.Path, r))
			}
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// UsedEntries returns, for each row of Layers (by index), the May entries
// some package of the row imports a package under (one build's view).
func UsedEntries(pkgs []Package) map[int]map[string]bool {
	used := map[int]map[string]bool{}
	for _, p := range pkgs {
		i, ok := rowOf(p.Path)
		if !ok {
			continue
		}
		imports := p.Imports
		if Layers[i].Tests {
			imports = append(slices.Clone(p.Imports), p.TestImports...)
		}
		for _, imp := range imports {
			r, ok := rel(imp)
			if !ok || r == p.Path {
				continue
			}
			for _, e := range Layers[i].May {
				if match(e, r) {
					if used[i] == nil {
						used[i] = map[string]bool{}
					}
					used[i][e] = true
				}
			}
		}
	}
	return used
}

// CheckUnused returns one line per May entry no package of its row imports
// in any of the builds whose UsedEntries are given: the table is a picture
// of the imports, not an upper bound.
func CheckUnused(builds ...map[int]map[string]bool) []string {
	var out []string
	for i, l := range Layers {
		for _, e := range l.May {
			if !slices.ContainsFunc(builds, func(u map[int]map[string]bool) bool { return u[i][e] }) {
				out = append(out, fmt.Sprintf("%s may import %s, and nothing there does: remove the entry (or the import table is an upper bound, not a picture)",
					strings.Join(l.Pkgs, ", "), e))
			}
		}
	}
	return out
}

// rowOf returns the index in Layers of the most specific row naming pkg.
func rowOf(pkg string) (int, bool) {
	best, bestLen := -1, -1
	for i, l := range Layers {
		for _, p := range l.Pkgs {
			if !match(p, pkg) {
				continue
			}
			n := len(p)
			if !strings.HasSuffix(p, "/...") {
				n += 1 << 16 // exact
			}
			if n > bestLen {
				best, bestLen = i, n
			}
		}
	}
	return best, best >= 0
}
