package scenarios

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rendermac/rendermac/harness/evidence"
	"github.com/rendermac/rendermac/server/ratelimit"
)

// The phase-fault catalogue (SPEC section 7): every named scenario is one
// script in testdata/scenarios, embedded so that `rendermac scenarios` runs
// the same catalogue from any directory. A script names its fault, the
// phase it strikes, the outcome it expects, the broken variants it must
// catch, and then drives the full stack step by step (catalogue_parse.go
// describes the language; scenario_*.go has one handler per command).

//go:embed testdata/scenarios/*.txt
var catalogueFiles embed.FS

// Scenario is one named phase-fault scenario of the catalogue.
type Scenario struct {
	// Name is the scenario's name (the file name without its number).
	Name string
	// Fault is what is injected; Phase is the lifecycle phase it strikes.
	Fault, Phase string
	// Expected is the outcome the scenario asserts, in words: the wire
	// replies and the final rows.
	Expected string
	// BrokenBy lists the deliberately broken variants (server variants or
	// harness variants, see VariantNames) this scenario must fail against.
	BrokenBy []string
	// Proposed describes the server variant that would break the scenario
	// when no available variant does; empty when BrokenBy is not.
	Proposed string
	// Rules are the ids of the contract's rules the scenario checks
	// (header `rules:`): its pass is their check on the card.
	Rules []string
	// Needs lists what the scenario requires beyond the shared Postgres:
	// NeedFaultpoints, NeedDedicatedPostgres, NeedProxy.
	Needs []string
	// File is the script's path inside the embedded catalogue.
	File  string
	steps []scStep
	pg    string // "shared", "dedicated" or "proxy"
	// noPings turns the gateways' WebSocket pings off (header `pings: off`),
	// so that only frames heartbeat the devices.
	noPings bool
	// leaseTTL is the stacks' lease TTL (header `lease-ttl:`; 0: scLeaseTTL).
	leaseTTL time.Duration
	// catalogue is the service catalogue the stacks run on (header
	// `catalogue:`, a file of testdata/catalogues); "" the built-in one.
	catalogue string
	// ffprobeTimeout turns ffprobe verification on, bounded by it (header
	// `ffprobe:`); 0 runs none.
	ffprobeTimeout time.Duration
	// proxies are the stacks' trusted reverse proxies (header `proxies:`).
	proxies string
	// limits are the stacks' abuse limits (header `limits:`), judged at
	// the run's limiter clock; nil: the defaults at the wall clock.
	limits *ratelimit.Limits
}

// What a scenario may need.
const (
	// NeedFaultpoints: the scenario arms server fault points, so the binary
	// must be built with -tags faultpoints.
	NeedFaultpoints = "faultpoints"
	// NeedDedicatedPostgres: the scenario stops and starts Postgres, so it
	// runs on a local cluster of its own (never the shared one).
	NeedDedicatedPostgres = "dedicated-postgres"
	// NeedProxy: the service's pool goes through the harness's TCP proxy.
	NeedProxy = "proxy"
)

// ErrNeedsFaultpoints is the error of a scenario that arms fault points
// when this binary was built without -tags faultpoints: it cannot inject
// its fault, and must not be reported as having passed.
var ErrNeedsFaultpoints = errors.New("scenario arms server fault points; build with -tags faultpoints")

// Runnable reports why s cannot run in this binary, or nil.
func (s Scenario) Runnable() error {
	if slices.Contains(s.Needs, NeedFaultpoints) && !faultpointsBuilt {
		return ErrNeedsFaultpoints
	}
	// Without ffprobe such a scenario is not run, and the card says so;
	// under CI, which installs it, it runs and fails.
	if slices.Contains(s.Needs, NeedFFprobe) && os.Getenv("CI") != "true" && ffprobeMissing() != nil {
		return ErrNeedsFFprobe
	}
	return nil
}

// Result is the outcome of one scenario run, shaped for the CLI table and
// the qualification card.
type Result struct {
	Name, Fault, Phase, Expected, Observed string
	// Passed: every step held, the scenario reached its branch, and SPEC
	// section 4 held over every row afterwards.
	Passed bool
	// Reached: every `reached` mark of the script held, proving the run
	// hit the branch the scenario exists for.
	Reached  bool
	Timeline []evidence.TimelineEvent
	Duration time.Duration
	// Err is why the scenario failed (a step, a mark, an invariant) or
	// could not run; nil when it passed.
	Err error
}

// Evidence converts r into the card's scenario entry.
func (r Result) Evidence(noTimings bool) evidence.Scenario {
	e := evidence.Scenario{Name: r.Name, Fault: r.Fault, Phase: r.Phase, Expected: r.Expected,
		Observed: r.Observed, Passed: r.Passed, Timeline: r.Timeline}
	if !noTimings {
		e.DurationMs = r.Duration.Milliseconds()
	}
	return e
}

var catalogue struct {
	once sync.Once
	list []Scenario
	err  error
}

// Catalogue returns every scenario, in file order. The embedded scripts are
// parsed once; a script that does not parse is a programming error of this
// package (the tests parse every one), so Catalogue panics on it.
func Catalogue() []Scenario {
	catalogue.once.Do(func() { catalogue.list, catalogue.err = loadCatalogue(catalogueFiles) })
	if catalogue.err != nil {
		panic(catalogue.err)
	}
	return slices.Clone(catalogue.list)
}

func loadCatalogue(fsys fs.FS) ([]Scenario, error) {
	files, err := fs.Glob(fsys, "testdata/scenarios/*.txt")
	if err != nil {
		return nil, err
	}
	slices.Sort(files)
	var out []Scenario
	seen := map[string]bool{}
	for _, f := range files {
		data, err := fs.ReadFile(fsys, f)
		if err != nil {
			return nil, err
		}
		s, err := parseScenario(f, string(data))
		if err != nil {
			return nil, err
		}
		if seen[s.Name] {
			return nil, fmt.Errorf("%s: scenario %q is defined twice", f, s.Name)
		}
		seen[s.Name] = true
		out = append(out, s)
	}
	return out, nil
}

// Select returns the catalogue's scenarios matching filter: empty is all,
// else a comma-separated list of names or path.Match patterns.
func Select(filter string) ([]Scenario, error) {
	all := Catalogue()
	if strings.TrimSpace(filter) == "" {
		return all, nil
	}
	var out []Scenario
	for _, pat := range strings.Split(filter, ",") {
		pat = strings.TrimSpace(pat)
		n := 0
		for _, s := range all {
			ok, err := path.Match(pat, s.Name)
			if err != nil {
				return nil, fmt.Errorf("scenario filter %q: %w", pat, err)
			}
			if ok && !slices.ContainsFunc(out, func(o Scenario) bool { return o.Name == s.Name }) {
				out = append(out, s)
				n++
			} else if ok {
				n++
			}
		}
		if n == 0 {
			return nil, fmt.Errorf("no scenario matches %q", pat)
		}
	}
	return out, nil
}

// RunAll runs the scenarios matching filter (see Select) one after another,
// skipping those this binary cannot run (Unavailable lists them). Fault
// points are process-global, so scenarios never run concurrently. A bad
// filter yields one failed Result naming it.
func RunAll(ctx context.Context, env *Env, filter string) []Result {
	list, err := Select(filter)
	if err != nil {
		return []Result{{Name: filter, Err: err, Observed: err.Error()}}
	}
	var out []Result
	for _, s := range list {
		if s.Runnable() != nil {
			continue
		}
		out = append(out, RunScenario(ctx, env, s))
		if ctx.Err() != nil {
			break
		}
	}
	return out
}

// Unavailable returns the scenarios matching filter that this binary
// cannot run, so that a report can say what it left out.
func Unavailable(filter string) []Scenario {
	list, err := Select(filter)
	if err != nil {
		return nil
	}
	var out []Scenario
	for _, s := range list {
		if s.Runnable() != nil {
			out = append(out, s)
		}
	}
	return out
}

// RunScenario runs one scenario on a fresh database and a fresh stack and
// reports what happened. It never panics on a scenario failure; the Result
// says why. Runs must not overlap within one process (fault points and
// their hit counters are process-global).
func RunScenario(ctx context.Context, env *Env, s Scenario) Result {
	res := Result{Name: s.Name, Fault: s.Fault, Phase: s.Phase, Expected: s.Expected}
	if err := s.Runnable(); err != nil {
		res.Err, res.Observed = err, "not run: "+err.Error()
		return res
	}
	env.runMu.Lock()
	defer env.runMu.Unlock()
	start := time.Now()
	r := newRun(ctx, env, s)
	err := r.execute()
	res.Duration = time.Since(start)
	res.Timeline = r.tl.events()
	res.Reached = r.marksTotal > 0 && r.marksOK == r.marksTotal
	res.Err = err
	if err == nil && !res.Reached {
		res.Err = errors.New("the scenario did not reach the branch it exists for")
	}
	res.Passed = res.Err == nil
	res.Observed = r.observed(res.Err)
	return res
}
