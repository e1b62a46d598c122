package archtest

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// setupScript installs what the tests and the harness run (`make test`
// runs it first).
const setupScript = "../../.ci/setup"

// dynamicPrograms are the files that run a program whose name is not a
// literal at the call (a variable, a configured path, the test binary),
// with the programs each may run. A new such call in another file fails
// TestSetupProvidesEveryProgram until it is declared here.
var dynamicPrograms = map[string][]string{
	"agent/power.go":                         {"caffeinate"},                 // macOS power assertion
	"agent/runner/command.go":                {"sh", "node"},                 // the operator's renderer: tests run sh scripts and deploy/composition
	"agent/runner/composition_linux_test.go": {"node", "ffmpeg", "chromium"}, // what the composition renderer needs
	"agent/runner/ffmpeg.go":                 {"ffmpeg"},                     // --ffmpeg, default ffmpeg on PATH
	"agent/runner/runner.go":                 {"ffmpeg"},                     // the same, checked with -version
	"cmd/rendermac/deploy_test.go":           {"systemd-analyze"},            // verifies the unit
	"cmd/rendermac/server.go":                {"ffprobe"},                    // --ffprobe PATH, checked with -version
	"harness/bench/idle.go":                  {selfBinary},                   // the idle clients' process
	"harness/bench/split.go":                 {selfBinary},                   // the server as a subprocess
	"harness/e2e/child_test.go":              {selfBinary},                   // the test binary as a child agent
	"harness/e2e/console_browser_test.go":    {"chromium"},                   // chromium, chromium-browser or Chrome
	"harness/e2e/input_test.go":              {"ffmpeg"},                     // a large input rendered
	"harness/e2e/s3process_test.go":          {selfBinary},
	"harness/e2e/tls_test.go":                {selfBinary},                                                                                        // the built server and agent
	"harness/fleet/patroni.go":               {"patroni", "etcd"},                                                                                 // PatroniAvailable: is a Patroni fleet possible here
	"harness/fleet/procs.go":                 {selfBinary},                                                                                        // server and agent processes
	"harness/scenarios/scenario_verify.go":   {"ffprobe"},                                                                                         // the installed ffprobe, found by LookPath
	"harness/mutate/run.go":                  {"go", selfBinary},                                                                                  // build and gate of each mutant
	"internal/archtest/programs_test.go":     {"bash", "dirname", "ls", "sort", "id", "mktemp", "cat"},                                            // the set-up script's own
	"internal/benchdb/pgbench.go":            {"pgbench"},                                                                                         // found on PATH or in /usr/lib/postgresql
	"internal/localserver/localserver.go":    {"versitygw", "pebble"},                                                                             // FindBin: PATH, GOBIN, GOPATH/bin, for the providers
	"internal/pebbleprovider/pebble.go":      {"pebble"},                                                                                          // the ACME test CA
	"internal/patroniprovider/child.go":      {"etcd", "patroni", "initdb", "pg_ctl", "postgres", "pg_basebackup", "pg_rewind", "pg_controldata"}, // etcd and Patroni, which runs these from pgprovider.BinDir
	"internal/pgprovider/local.go":           {"initdb", "postgres"},                                                                              // from the server binaries' directory
	"server/store/schema_test.go":            {"pg_dump"},                                                                                         // from the server binaries' directory: the schema in force
	"internal/s3provider/provider.go":        {"versitygw"},                                                                                       // found on PATH, GOBIN or GOPATH/bin
	"server/controlplane/main_test.go":       {"go", selfBinary},                                                                                  // builds and runs the server
	"server/controlplane/metrics_test.go":    {selfBinary},                                                                                        // the built server
	"server/faultpoint/kill_unix_test.go":    {selfBinary},                                                                                        // the test binary as a helper process
	"server/fencing/defaultbuild_test.go":    {"go"},                                                                                              // $GOROOT/bin/go
	"server/fencing/verify_test.go":          {"ffmpeg"},                                                                                          // renders test outputs
	"server/probe/probe.go":                  {"ffprobe"},                                                                                         // the configured ffprobe
}

// shellPrograms are run by shell scripts the Go code passes to sh -c,
// which the scan of exec calls does not see.
var shellPrograms = map[string][]string{
	"harness/e2e/devquickstart_test.go": {"curl", "sed", "grep", "seq"}, // the commands `rendermac dev` prints
}

// selfBinary stands for a binary built from this tree or the running test
// binary: nothing to install.
const selfBinary = "(this tree's binary)"

// basePrograms are not the set-up script's to install: the OS base of a
// Debian machine or a Mac, and what running `make test` already needs (Go,
// make, git for the checkout).
var basePrograms = map[string]string{
	"sh": "Debian base", "sleep": "Debian base", "true": "Debian base", "sed": "Debian base", "grep": "Debian base",
	"seq": "Debian base", "ps": "Debian base (procps)", "bash": "Debian base", "dirname": "Debian base", "ls": "Debian base",
	"sort": "Debian base", "id": "Debian base", "mktemp": "Debian base", "cat": "Debian base",
	"mount": "Debian base", "umount": "Debian base",
	"go": "a prerequisite", "make": "a prerequisite", "git": "a prerequisite (the checkout)",
	"launchctl": "macOS base", "caffeinate": "macOS base",
	selfBinary: "built from this tree",
}

var needLine = regexp.MustCompile(`(?m)^need\s+(\S+)\s+"([^"]*)"\s+(\S+)`)

// setupProvides parses the set-up script's manifest: program -> step.
func setupProvides(t *testing.T) map[string]string {
	t.Helper()
	data, err := os.ReadFile(setupScript)
	require.NoError(t, err)
	out := map[string]string{}
	for _, m := range needLine.FindAllStringSubmatch(string(data), -1) {
		for _, p := range strings.Fields(m[2]) {
			out[filepath.Base(p)] = m[1] + " (" + m[3] + ")"
		}
	}
	require.NotEmpty(t, out, "no `need` lines in %s", setupScript)
	return out
}

// execCall is one exec.LookPath, exec.Command or exec.CommandContext call:
// the program when it is a string literal, else "".
type execCall struct {
	pos     string // file:line, relative to the module root
	program string
}

// execCalls finds every exec call in the module's Go files.
func execCalls(t *testing.T, root string) []execCall {
	t.Helper()
	var calls []execCall
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		packageCalls(f, func(call *ast.CallExpr, _, pkg, fn string) {
			arg := 0
			switch {
			case pkg != "os/exec":
				return
			case fn == "CommandContext":
				arg = 1
			case fn != "LookPath" && fn != "Command":
				return
			}
			if len(call.Args) <= arg {
				return
			}
			c := execCall{pos: rel + ":" + strconv.Itoa(fset.Position(call.Pos()).Line)}
			if lit, ok := call.Args[arg].(*ast.BasicLit); ok && lit.Kind == token.STRING {
				s, _ := strconv.Unquote(lit.Value)
				c.program = filepath.Base(s)
			}
			calls = append(calls, c)
		})
		return nil
	})
	require.NoError(t, err)
	return calls
}

// Every program the Go code runs or looks up (tests and the harness
// included) is one the set-up script provides, or part of the OS base or
// a prerequisite: a newcomer's `make test` fails for no missing tool. A
// call whose program is not a literal is declared in dynamicPrograms.
func TestSetupProvidesEveryProgram(t *testing.T) {
	t.Parallel()
	provided := setupProvides(t)
	calls := execCalls(t, "../..")
	require.NotEmpty(t, calls)

	needed := map[string][]string{} // program -> where it is run
	dynamicFiles := map[string]bool{}
	var undeclared []string
	for _, c := range calls {
		if c.program != "" {
			needed[c.program] = append(needed[c.program], c.pos)
			continue
		}
		file := c.pos[:strings.LastIndexByte(c.pos, ':')]
		dynamicFiles[file] = true
		progs, ok := dynamicPrograms[file]
		if !ok {
			undeclared = append(undeclared, c.pos)
			continue
		}
		for _, p := range progs {
			needed[p] = append(needed[p], c.pos)
		}
	}
	for file, progs := range shellPrograms {
		_, err := os.Stat(filepath.Join("../..", file))
		require.NoError(t, err, "shellPrograms names a file that is gone")
		for _, p := range progs {
			needed[p] = append(needed[p], file)
		}
	}
	require.Empty(t, undeclared, "these exec calls run a program named by a variable: declare what each may run "+
		"in dynamicPrograms (internal/archtest/programs_test.go)")
	var stale []string
	for file := range dynamicPrograms {
		if !dynamicFiles[file] {
			stale = append(stale, file)
		}
	}
	sort.Strings(stale)
	require.Empty(t, stale, "dynamicPrograms names files without such a call any more: remove them")

	var unprovided []string
	for p, where := range needed {
		if provided[p] == "" && basePrograms[p] == "" {
			unprovided = append(unprovided, p+" (run at "+strings.Join(slices.Compact(where), ", ")+")")
		}
	}
	sort.Strings(unprovided)
	require.Empty(t, unprovided, "programs the code runs that .ci/setup does not provide: add a `need` line for each")
	for _, p := range []string{"ffmpeg", "ffprobe", "chromium", "node", "versitygw", "initdb", "pgbench"} {
		require.Contains(t, needed, p, "the scan finds the calls it exists for (%s)", p)
	}
}

// Where the set-up script cannot install, it fails with one line saying
// what to run: here apt-get is needed for the missing tools (a PATH
// without them) and the user is not root (nobody, when the test runs as
// root), so that line is the sudo command with every missing package.
func TestSetupFailsInOneLineWithoutRoot(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	bin := filepath.Join(root, "bin")
	require.NoError(t, os.MkdirAll(filepath.Join(root, ".ci"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(root, "deploy", "composition"), 0o755))
	require.NoError(t, os.MkdirAll(bin, 0o755))
	for _, f := range []string{".ci/setup", "deploy/composition/package-lock.json"} {
		data, err := os.ReadFile(filepath.Join("../..", f))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(root, f), data, 0o755))
	}
	for _, p := range []string{"bash", "dirname", "ls", "sort", "id", "mktemp", "cat"} {
		path, err := exec.LookPath(p)
		require.NoError(t, err)
		require.NoError(t, os.Symlink(path, filepath.Join(bin, p)))
	}
	// apt-get is there (a Debian machine) but must not be run.
	require.NoError(t, os.WriteFile(filepath.Join(bin, "apt-get"), []byte("#!/bin/sh\necho apt-get ran >&2; exit 3\n"), 0o755))
	for d := root; d != filepath.Dir(d) && strings.HasPrefix(d, os.TempDir()); d = filepath.Dir(d) {
		require.NoError(t, os.Chmod(d, 0o755)) // nobody reads the copy
	}

	cmd := exec.Command(filepath.Join(bin, "bash"), filepath.Join(root, ".ci", "setup"))
	cmd.Dir = root
	cmd.Env = []string{"PATH=" + bin, "HOME=" + root}
	if os.Geteuid() == 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, "stdout:\n%s\nstderr:\n%s", &stdout, &stderr)
	require.Equal(t, 1, ee.ExitCode())
	lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
	require.Len(t, lines, 1, "one line on stderr: %q", stderr.String())
	m := regexp.MustCompile(`^setup: FAILED: missing (.+); apt-get needs root: run  sudo apt-get update && sudo apt-get install -y (.+)  then make test again$`).
		FindStringSubmatch(lines[0])
	require.NotNil(t, m, lines[0])
	require.Equal(t, m[1], m[2])
	for _, pkg := range []string{"ffmpeg", "nodejs", "npm", "chromium", "curl", "patroni", "etcd-server"} {
		require.Contains(t, strings.Fields(m[2]), pkg)
	}
	for _, l := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
		require.Regexp(t, `^setup: \S+: present \(.*\) in \d+\.\d\ds$`, l, "before failing it says only what is present")
	}
}
