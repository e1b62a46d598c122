package mutate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rendermac/rendermac/harness/evidence"
)

// Options bound one campaign.
type Options struct {
	// Root is the source tree (the module root); it is copied, never changed.
	Root string
	// Mutants to run (default Catalogue).
	Mutants []Mutant
	// Workers is how many mutants run at once, each in its own tree copy.
	Workers int
	// Timeout bounds one mutant's gate (build, qualify, tests).
	Timeout time.Duration
	// QualifyArgs is the bounded gate, given to `rendermac qualify`.
	QualifyArgs []string
	// Tests also runs the mutated package's tests on a mutant qualify
	// missed, to name a test that kills it.
	Tests bool
	// Progress gets one line per mutant as it finishes.
	Progress io.Writer
	// Checks, when set, names the checks of qualify that reach a mutant's
	// rules (contract.Traced and the scenarios' rules headers, the
	// vocabulary of contract.RuleTrace.Checks). Each mutant then first
	// runs the focused gate (FocusedArgs), and the bounded gate only if
	// that one misses it.
	Checks func(Mutant) []string
}

// Tags is what the gate's binary and tests are built with.
const Tags = "faultpoints,mutations"

// DefaultQualifyArgs is the bounded gate: fewer seeds and steps than the
// release gate, all three campaigns, and the whole scenario catalogue. Its
// campaigns are too small to reach every required cell, so the coverage
// gate is off: a mutant must be killed by a check, not by a small shape.
var DefaultQualifyArgs = []string{"--seeds", "100", "--steps", "100", "--pg-seeds", "20", "--stack-seeds", "5",
	"--determinism-seeds", "0", "--determinism-pg-seeds", "0", "--workers", "1", "--pg-workers", "1", "--no-timings", "--no-coverage-gate", "--no-fleet"}

// Run runs every mutant through the gate and returns the score. An error is
// for the campaign itself (the tree cannot be copied, the catalogue does not
// fit); a mutant's failure to build is recorded as invalid.
func Run(ctx context.Context, o Options) (evidence.MutationScore, error) {
	if o.Mutants == nil {
		o.Mutants = Catalogue
	}
	if o.Workers < 1 {
		o.Workers = 1
	}
	if o.QualifyArgs == nil {
		o.QualifyArgs = DefaultQualifyArgs
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	score := evidence.MutationScore{Gate: "rendermac qualify " + strings.Join(o.QualifyArgs, " ")}
	if err := Check(o.Root, o.Mutants); err != nil {
		return score, err
	}
	tmp, err := os.MkdirTemp("", "rendermac-mutate-")
	if err != nil {
		return score, err
	}
	defer os.RemoveAll(tmp)
	trees := make(chan string, o.Workers)
	for i := range o.Workers {
		dir := filepath.Join(tmp, fmt.Sprintf("tree%d", i))
		if err := CopyTree(o.Root, dir); err != nil {
			return score, fmt.Errorf("copy source tree: %w", err)
		}
		trees <- dir
	}
	results := make([]evidence.Mutant, len(o.Mutants))
	var wg sync.WaitGroup
	var mu sync.Mutex
	done := 0
	for i, m := range o.Mutants {
		dir := <-trees
		wg.Go(func() {
			defer func() { trees <- dir }()
			results[i] = runOne(ctx, o, dir, m)
			mu.Lock()
			done++
			r := results[i]
			fmt.Fprintf(o.Progress, "mutate: %d/%d %s: %s %s (%s)\n", done, len(o.Mutants), m.ID, r.Outcome,
				strings.Join(r.KilledBy, "; "), time.Duration(r.DurationMs)*time.Millisecond)
			mu.Unlock()
		})
	}
	wg.Wait()
	score.Mutants = results
	for _, r := range results {
		if r.Outcome == "invalid" {
			continue
		}
		score.Total++
		if r.Outcome == "killed" || r.Outcome == "timeout" {
			score.Killed++
		}
		if r.ByQualify() {
			score.KilledByQualify++
		}
	}
	return score, ctx.Err()
}

// runOne applies m in dir, runs the gate, and restores dir.
func runOne(ctx context.Context, o Options, dir string, m Mutant) (r evidence.Mutant) {
	start := time.Now()
	r = evidence.Mutant{ID: m.ID, Kind: m.Kind, File: m.File, What: m.What, Rules: m.Rules}
	defer func() { r.DurationMs = time.Since(start).Milliseconds() }()
	restore, err := Apply(dir, m)
	if err != nil {
		r.Outcome, r.Detail = "invalid", err.Error()
		return r
	}
	defer func() {
		if err := restore(); err != nil {
			panic(fmt.Sprintf("mutate: cannot restore %s after %s: %v", m.File, m.ID, err))
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	bin := filepath.Join(dir, "bin", "rendermac-mutant")
	if out, err := command(ctx, dir, "go", "build", "-tags", Tags, "-o", bin, "./cmd/rendermac"); err != nil {
		r.Outcome, r.Detail = "invalid", "build: "+firstLines(out, 5)
		if ctx.Err() != nil {
			r.Outcome = "timeout"
		}
		return r
	}
	r.Gate = "bounded"
	args := o.QualifyArgs
	if o.Checks != nil {
		if focused := FocusedArgs(o.QualifyArgs, o.Checks(m)); !slices.Equal(focused, o.QualifyArgs) {
			killed, by, detail, err := qualify(ctx, dir, bin, focused)
			if err == nil && killed && ctx.Err() == nil {
				r.Outcome, r.KilledBy, r.Detail, r.Gate = "killed", by, detail, "focused"
				return r
			}
		}
	}
	killed, by, detail, err := qualify(ctx, dir, bin, args)
	switch {
	case ctx.Err() != nil:
		r.Outcome, r.KilledBy, r.Detail = "timeout", []string{"timeout"}, fmt.Sprintf("gate did not finish in %s", o.Timeout)
		return r
	case err != nil:
		r.Outcome, r.Detail = "invalid", err.Error()
		return r
	case killed:
		r.Outcome, r.KilledBy, r.Detail = "killed", by, detail
		return r
	}
	r.Outcome = "survived"
	if o.Tests {
		pkgs := testPackages(m.File)
		out, err := command(ctx, dir, "go", append([]string{"test", "-tags", Tags, "-count=1"}, pkgs...)...)
		if err != nil && ctx.Err() == nil {
			r.Outcome = "killed"
			r.KilledBy = []string{"test " + strings.Join(pkgs, " ") + ": " + strings.Join(failedTests(out), ", ")}
			r.Detail = firstLines(out, 3)
		}
	}
	return r
}

// FocusedArgs narrows the bounded gate to the checks that reach a mutant's
// rules: the model-vs-Postgres and three-way campaigns only if a check
// names them (or the token check, which reads every campaign), the
// scenarios whose rules headers name a rule (none: --no-scenarios), and
// the S3 runs of those only. The model campaign and the contract tables
// run as in the bounded gate (they are cheap, and the model campaign
// runs protocol's code). Every check it keeps runs with the bounded
// gate's sizes and seeds, and every check is deterministic in its seed,
// so a mutant the focused gate kills is one the bounded gate kills: the
// first stage only saves the time of the checks that cannot see the
// mutant. A gate given with --scenarios or --no-scenarios keeps its
// scenario choice. Flags are appended: the last occurrence of a flag wins.
func FocusedArgs(base, checks []string) []string {
	has := func(c string) bool { return slices.Contains(checks, c) }
	out := slices.Clone(base)
	tokens := has("campaign-tokens")
	if !tokens && !has("campaign:model-vs-postgres") {
		out = append(out, "--pg-seeds", "0")
	}
	if !tokens && !has("campaign:model-vs-postgres-vs-stack") {
		out = append(out, "--stack-seeds", "0")
	}
	if slices.ContainsFunc(base, func(a string) bool {
		return a == "--scenarios" || a == "--no-scenarios" || strings.HasPrefix(a, "--scenarios=")
	}) {
		return out
	}
	var names, onS3 []string
	for _, c := range checks {
		name, ok := strings.CutPrefix(c, "scenario:")
		if !ok {
			continue
		}
		if n, s3 := strings.CutSuffix(name, "@s3"); s3 {
			onS3 = append(onS3, n)
		} else if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	switch {
	case len(names) == 0 && len(onS3) == 0:
		out = append(out, "--no-scenarios")
	case len(names) == 0:
		// --no-scenarios would skip the S3 runs too: run those scenarios
		// in a directory as well, as the bounded gate does.
		out = append(out, "--scenarios", strings.Join(onS3, ","))
	default:
		out = append(out, "--scenarios", strings.Join(names, ","))
	}
	return append(out, "--s3-scenarios="+strings.Join(onS3, ","))
}

// testPackages is what a mutant of file is tested with after the gate:
// its own package (every server package for a migration), and for the
// service layer and the store also the conformance suite, which holds the
// contract cases the model and the server once each wrote for themselves.
func testPackages(file string) []string {
	pkg := "./" + path.Dir(file)
	if strings.HasSuffix(file, ".sql") {
		pkg = "./server/..."
	}
	if pkg == "./server/fencing" || strings.HasPrefix(pkg, "./server/store") || pkg == "./server/..." {
		return []string{pkg, "./harness/conformance"}
	}
	return []string{pkg}
}

// qualify runs the gate binary and reads its card: which campaigns and
// scenarios failed. Exit 1 with a card is a kill; any other failure is an
// error of the gate, not a verdict.
func qualify(ctx context.Context, dir, bin string, args []string) (killed bool, by []string, detail string, err error) {
	out := filepath.Join(dir, "mutate-out")
	_ = os.RemoveAll(out)
	defer os.RemoveAll(out)
	stdout, runErr := command(ctx, dir, bin, append(append([]string{"qualify"}, args...), "--out", out)...)
	var exit *exec.ExitError
	if runErr != nil && (!errors.As(runErr, &exit) || exit.ExitCode() != 1) {
		return false, nil, "", fmt.Errorf("qualify: %v: %s", runErr, firstLines(stdout, 5))
	}
	cards, _ := filepath.Glob(filepath.Join(out, "*.json"))
	if len(cards) != 1 {
		if runErr != nil {
			return false, nil, "", fmt.Errorf("qualify failed without a card: %s", firstLines(stdout, 5))
		}
		return false, nil, "", errors.New("qualify wrote no card")
	}
	f, err := os.Open(cards[0])
	if err != nil {
		return false, nil, "", err
	}
	defer f.Close()
	card, err := evidence.ReadJSON(f)
	if err != nil {
		return false, nil, "", err
	}
	if card.Passed {
		return false, nil, "", nil
	}
	for _, fl := range card.Failures {
		if !slices.Contains(by, fl.Source) {
			by = append(by, fl.Source)
		}
	}
	if len(card.Failures) > 0 {
		detail = firstLines([]byte(card.Failures[0].Detail), 1)
	}
	return true, by, detail, nil
}

// command runs name in dir with its output (stdout and stderr) collected.
func command(ctx context.Context, dir, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.WaitDelay = 10 * time.Second
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err := cmd.Run()
	return buf.Bytes(), err
}

var failLine = regexp.MustCompile(`(?m)^\s*--- FAIL: (\S+)`)

// failedTests lists the top-level tests that failed in go test output.
func failedTests(out []byte) []string {
	var names []string
	for _, m := range failLine.FindAllSubmatch(out, -1) {
		name, _, _ := strings.Cut(string(m[1]), "/")
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return []string{"build or setup failed"}
	}
	return names
}

func firstLines(b []byte, n int) string {
	lines := strings.SplitN(strings.TrimSpace(string(b)), "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, " | ")
}
