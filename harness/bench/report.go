package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/olekukonko/tablewriter"

	"github.com/rendermac/rendermac/internal/dbstat"
)

// Figure is one row of the report.
type Figure struct {
	Name  string `json:"figure"`
	Value string `json:"value"`
	Goal  string `json:"goal"`
	Met   string `json:"met"`
}

// Figures turns a result into the report's rows: figure, value, goal and
// whether it was met (with by how much it was missed).
func (r *Result) Figures() []Figure {
	var out []Figure
	add := func(name, value, goal, met string) { out = append(out, Figure{name, value, goal, met}) }
	ref := pgbenchRef(add, "", r.Pgbench)
	r.stackFigures(add, "", r.Peak, r.Latency, r.Progress, r.DB, ref)
	r.floorFigures(add)
	if sp := r.Split; sp != nil {
		if sp.Pgbench != nil { // else (--client-only) the same reference as above
			ref = pgbenchRef(add, "two-process: ", *sp.Pgbench)
		}
		r.stackFigures(add, "two-process: ", sp.Peak, sp.Latency, sp.Progress, sp.DB, ref)
		add("two-process: SPEC section 4 invariant violations", fmt.Sprint(sp.InvariantViolations), "0",
			map[bool]string{true: "yes", false: "NO"}[sp.InvariantViolations == 0])
	}
	var met string
	mem := r.Memory
	goalB := float64(GoalIdleSessionBytes)
	memRows := len(out)
	met = "yes"
	switch {
	case mem.HeapStackPerSession > goalB:
		met = fmt.Sprintf("NO: %.1f KiB over", (mem.HeapStackPerSession-goalB)/1024)
	case mem.Sessions < GoalIdleSessions:
		met = fmt.Sprintf("n/a: goal is at %d sessions (ran %d)", GoalIdleSessions, mem.Sessions)
	}
	add(fmt.Sprintf("server heap + goroutine stacks per idle session (%d held, clients in another process)", mem.Sessions),
		fmt.Sprintf("%.1f KiB (heap %.1f + stacks %.1f; %.2f goroutines/session)", mem.HeapStackPerSession/1024,
			mem.HeapPerSession/1024, (mem.HeapStackPerSession-mem.HeapPerSession)/1024, mem.GoroutinesPerSession),
		fmt.Sprintf("<= %d KiB at %d sessions", GoalIdleSessionBytes>>10, GoalIdleSessions), met)
	met = "yes"
	if mem.IdleWakeups > 0 {
		met = fmt.Sprintf("NO: %d wake-ups (%.3f per session)", mem.IdleWakeups, mem.IdleWakeupsPerSession)
	}
	add(fmt.Sprintf("idle session wake-ups in %.1f s, heartbeats aside", mem.WindowS),
		fmt.Sprintf("%d (frames %d, offer passes %d, notices %d; heartbeat pings %d; process: %d goroutines created, %.0f ms CPU)",
			mem.IdleWakeups, mem.Wakeups.Frames, mem.Wakeups.Offers, mem.Wakeups.Notices, mem.Wakeups.Pings,
			mem.GoroutinesCreated, mem.CPUms),
		"0 per session", met)
	if mem.Sessions == 0 { // --client-only: the server's memory is another process's
		for i := memRows; i < len(out); i++ {
			out[i].Value, out[i].Met = "not run", "n/a: no idle-session phase in this mode"
		}
	}
	met = "yes"
	if r.Model.Error != "" {
		met = "error: " + r.Model.Error
	} else if r.Model.StepsPerS < GoalModelStepsPerSec {
		met = fmt.Sprintf("NO: %.0f steps/s short (%.0f%% of goal)", GoalModelStepsPerSec-r.Model.StepsPerS, 100*r.Model.StepsPerS/GoalModelStepsPerSec)
	}
	add(fmt.Sprintf("model steps/s (%d workers, invariants every step)", r.Model.Workers),
		fmt.Sprintf("%.0f (%d seqs in %.1f s, %d failures)", r.Model.StepsPerS, r.Model.Seeds, r.Model.Seconds, r.Model.Failures),
		fmt.Sprintf(">= %d", GoalModelStepsPerSec), met)
	add(campaignFigure("model vs Postgres", r.Diff, GoalDiffStepsPerSec))
	add(campaignFigure("three-way (model, Postgres, full stack)", r.ThreeWay, GoalThreeWayStepsPerSec))
	add("SPEC section 4 invariant violations after the load", fmt.Sprint(r.InvariantViolations), "0", map[bool]string{true: "yes", false: "NO"}[r.InvariantViolations == 0])
	add("slowest transaction", fmt.Sprintf("%s: p99 %.1f ms", r.Slowest.Name, r.Slowest.P99ms), "", "")
	return out
}

// PrintTable writes the figures and the per-operation timings.
func (r *Result) PrintTable(w io.Writer) error {
	t := tablewriter.NewWriter(w)
	t.Header("figure", "value", "goal", "met?")
	for _, f := range r.Figures() {
		if err := t.Append(f.Name, f.Value, f.Goal, f.Met); err != nil {
			return err
		}
	}
	if err := t.Render(); err != nil {
		return err
	}
	ops := tablewriter.NewWriter(w)
	ops.Header("operation (client-side)", "count", "p50 ms", "p99 ms", "max ms")
	for _, o := range r.Ops {
		if err := ops.Append(o.Op, o.Count, fmt.Sprintf("%.2f", o.P50ms), fmt.Sprintf("%.2f", o.P99ms), fmt.Sprintf("%.2f", o.Maxms)); err != nil {
			return err
		}
	}
	if err := ops.Render(); err != nil {
		return err
	}
	if err := printDB(w, "", r.DB); err != nil {
		return err
	}
	if err := printMix(w, "stack (peak phase)", r.Mix); err != nil {
		return err
	}
	if err := printMix(w, "replay (job.pgbench)", r.Floor.ReplayMix); err != nil {
		return err
	}
	if err := printWrites(w, r.Floor); err != nil {
		return err
	}
	if sp := r.Split; sp != nil {
		if err := printDB(w, "two-process: ", sp.DB); err != nil {
			return err
		}
		fmt.Fprintf(w, "two-process: %s\n", sp.How)
	}
	fmt.Fprintf(w, "slowest transaction: %s (%s)\n", r.Slowest.Name, r.Slowest.Method)
	fmt.Fprintf(w, "leases: agents have %d slot(s) each; a slot's next lease waits for its commit_ok, so leases/s is the closed-loop rate, bounded by the commit cycle\n", max(r.Slots, 1))
	fmt.Fprintf(w, "latency: %s\n", r.Latency.Definition)
	fmt.Fprintf(w, "memory: %s\n", r.Memory.Note)
	fmt.Fprintf(w, "phases (s): %v; wall %.1f s; %s, %d CPUs, PostgreSQL %s\n", r.PhaseS, r.WallS, r.GoVersion, r.CPUs, r.Postgres)
	return nil
}

// WriteJSON writes the result and its figures to path.
func (r *Result) WriteJSON(path string) error {
	data, err := json.MarshalIndent(struct {
		*Result
		Figures []Figure `json:"figures"`
	}{r, r.Figures()}, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

// reference is the pgbench run a stack's figures are compared with.
type reference PgbenchResult

// pgbenchRef adds the row of the pgbench run pb, the reference of the stack
// figures measured just after it.
func pgbenchRef(add func(name, value, goal, met string), prefix string, pb PgbenchResult) reference {
	name := prefix + "pgbench lease.pgbench tps, run just before the stack"
	if pb.TPS <= 0 {
		add(name, "not run", "reference", pb.Error)
		return reference(pb)
	}
	value := fmt.Sprintf("%.0f (-c %d, %d s)", pb.TPS, pb.Clients, pb.Seconds)
	switch c := pb.CPU; {
	case c == nil:
	case c.Error != "":
		value += "; CPU per tx not measured: " + c.Error
	default:
		value += fmt.Sprintf("; CPU %.2f ms per tx: Postgres %.2f + pgbench %.2f (%.2f cores busy)",
			c.TotalMS(), c.PostgresMS, c.PgbenchMS, c.Busy)
	}
	add(name, value, "reference", "")
	return reference(pb)
}

// ratio is " (R x pgbench)" for a rate v, or "" without a reference.
func (ref reference) ratio(v float64) string {
	if ref.TPS <= 0 {
		return ""
	}
	return fmt.Sprintf(" (%.2f x pgbench)", v/ref.TPS)
}

// withdrawn is the goal column of the rates once held to issue 13's
// 0.5x of one lease transaction: the goal is withdrawn (a whole job is
// three transactions; issue 32 measures the stack against the replay of
// its own statement mix instead), the ratio stays as a reference.
const withdrawn = "none (issue 13's 0.5 x pgbench, withdrawn)"

// cpuBound is the ratio the CPU allows: on a machine whose cores both runs
// keep busy, rates go as the inverse of CPU time per unit, so pgbench's
// CPU per transaction over the stack's per job approximates the measured
// ratio, and over Postgres's share of it bounds what any control plane
// could reach with the same SQL on the same cores (its own cost taken as
// nothing). A reference, like the ratio it explains. Nil without both
// measurements.
func (ref reference) cpuBound(prefix string, c *PeakCPU) *Figure {
	pb := ref.CPU
	if ref.TPS <= 0 || pb == nil || pb.Error != "" || c == nil || c.Error != "" || c.PostgresMS <= 0 {
		return nil
	}
	job := c.PostgresMS + c.ServerMS + c.ProcessMS
	return &Figure{
		Name: prefix + "the ratio CPU time allows (pgbench's CPU per tx / CPU per job)",
		Value: fmt.Sprintf("%.2f x: %.2f ms per tx / %.2f ms per job; Postgres's %.2f ms per job alone: %.2f x",
			pb.TotalMS()/job, pb.TotalMS(), job, c.PostgresMS, pb.TotalMS()/c.PostgresMS),
		Goal: withdrawn,
	}
}

// stackFigures adds the rows of one run of the stack phases.
func (r *Result) stackFigures(add func(name, value, goal, met string), prefix string, peak PeakResult,
	lat LatencyResult, prog ProgressResult, db DBResult, ref reference) {
	ratio := ref.ratio
	add(fmt.Sprintf("%sleases/s at peak (%d jobs up front, %d agents x %d slots)", prefix, peak.Jobs, r.Agents, max(r.Slots, 1)),
		fmt.Sprintf("%.0f%s", peak.LeasesPerSec, ratio(peak.LeasesPerSec)), withdrawn, "")
	add(prefix+"commits/s at peak", fmt.Sprintf("%.0f%s", peak.CommitsPerSec, ratio(peak.CommitsPerSec)), withdrawn, "")
	add(prefix+"job submits/s (POST /v1/jobs, 16 clients)", fmt.Sprintf("%.0f%s", peak.SubmitPerSec, ratio(peak.SubmitPerSec)), "", "")
	add(fmt.Sprintf("%se2e latency p50 at %.0f/s (half peak), %d agents", prefix, lat.TargetPerSec, r.Agents),
		fmt.Sprintf("%.1f ms (p90 %.1f, max %.1f; %d jobs)", lat.P50ms, lat.P90ms, lat.Maxms, lat.Completed), "", "")
	goalMS := float64(GoalP99.Milliseconds())
	met := "yes"
	if r.Agents != 100 {
		met = fmt.Sprintf("n/a: goal is for 100 agents (ran %d)", r.Agents)
	}
	if lat.P99ms >= goalMS {
		met = fmt.Sprintf("NO: %.1f ms over (%.1fx the goal)", lat.P99ms-goalMS, lat.P99ms/goalMS)
	}
	add(prefix+"e2e latency p99 (submit -> commit_ok)", fmt.Sprintf("%.1f ms", lat.P99ms), fmt.Sprintf("< %.0f ms", goalMS), met)
	if lat.Completed > 0 {
		p, w := lat.StagesP99, lat.Slowest
		add(prefix+"e2e latency by stage: p99 of each (the slowest job's own)",
			fmt.Sprintf("submit -> offer %.1f (%.1f; of it the POST %.1f (%.1f)), offer -> commit sent %.1f (%.1f), "+
				"commit -> commit_ok %.1f (%.1f) ms", p.ToOfferMS, w.ToOfferMS, p.PostMS, w.PostMS, p.WorkMS, w.WorkMS,
				p.CommitMS, w.CommitMS), "", "")
	}
	add(prefix+"progress frames/s (heartbeat as fast as progress_ok)", fmt.Sprintf("%.0f%s", prog.FramesPerSec, ratio(prog.FramesPerSec)), "", "")
	add(dbFigure(prefix, db))
	add(cpuFigure(prefix, peak.CPU))
	if f := ref.cpuBound(prefix, peak.CPU); f != nil {
		add(f.Name, f.Value, f.Goal, f.Met)
	}
}

// cpuFigure is the peak's CPU per job.
func cpuFigure(prefix string, c *PeakCPU) (name, value, goal, met string) {
	name = prefix + "CPU per job at peak (/proc: utime + stime)"
	switch {
	case c == nil:
		return name, "not measured", "", ""
	case c.Error != "":
		return name, "not measured", "", "n/a: " + c.Error
	case c.ServerElsewhere:
		value = fmt.Sprintf("%.2f ms: Postgres %.2f + load generator %.2f; the server's CPU not measured (not started here) "+
			"(%.2f cores busy without it)", c.PostgresMS+c.ProcessMS, c.PostgresMS, c.ProcessMS, c.Busy)
	case c.ServerMS > 0:
		value = fmt.Sprintf("%.2f ms: Postgres %.2f + server %.2f + load generator %.2f (%.2f cores busy)",
			c.PostgresMS+c.ServerMS+c.ProcessMS, c.PostgresMS, c.ServerMS, c.ProcessMS, c.Busy)
	default:
		value = fmt.Sprintf("%.2f ms: Postgres %.2f + this process (control plane and load generator) %.2f (%.2f cores busy)",
			c.PostgresMS+c.ProcessMS, c.PostgresMS, c.ProcessMS, c.Busy)
	}
	return name, value, "", ""
}

// dbFigure is the per-job database work of the happy path.
func dbFigure(prefix string, db DBResult) (name, value, goal, met string) {
	name = prefix + "database work per job, happy path (lease, progress, commit), measured"
	goal = fmt.Sprintf("<= %d tx + %d statement outside", GoalTxPerJob, GoalOutsidePerJob)
	if db.Error != "" || db.Jobs == 0 {
		return name, "not measured", goal, "n/a: " + db.Error
	}
	// The no_job Leases at the drain are no job's path: counted apart, but
	// their statements and round trips stay in the figures.
	c, drain := db.HappyPath(), db.NoJobLeases()
	n := float64(db.Jobs)
	tx, out := float64(c.Transactions-drain)/n, float64(c.Outside)/n
	value = fmt.Sprintf("%.2f tx + %.2f outside; %.2f statements in tx, %.2f round trips (these two with the "+
		"%d no_job leases at the drain, %.2f tx/job more)", tx, out, float64(c.InTx)/n, float64(c.RoundTrips)/n,
		drain, float64(drain)/n)
	met = "yes"
	if tx > GoalTxPerJob+0.005 || out > GoalOutsidePerJob+0.005 {
		met = fmt.Sprintf("NO: %.2f tx, %.2f outside over", max(0, tx-GoalTxPerJob), max(0, out-GoalOutsidePerJob))
	}
	return name, value, goal, met
}

// printDB writes the peak phase's database work by operation.
func printDB(w io.Writer, prefix string, db DBResult) error {
	if db.Error != "" || db.Jobs == 0 {
		fmt.Fprintf(w, "database work: not measured (%s)\n", db.Error)
		return nil
	}
	t := tablewriter.NewWriter(w)
	t.Header(prefix+"db work in the peak phase, by operation", "tx", "stmts in tx", "outside", "round trips",
		"tx/job", "stmts/job", "outside/job", "rt/job")
	n := float64(db.Jobs)
	happy := map[string]bool{}
	for _, op := range HappyPathOps {
		happy[op] = true
	}
	row := func(name string, c dbstat.Counts) error {
		return t.Append(name, c.Transactions, c.InTx, c.Outside, c.RoundTrips,
			fmt.Sprintf("%.2f", float64(c.Transactions)/n), fmt.Sprintf("%.2f", float64(c.InTx)/n),
			fmt.Sprintf("%.2f", float64(c.Outside)/n), fmt.Sprintf("%.2f", float64(c.RoundTrips)/n))
	}
	for _, op := range HappyPathOps {
		if err := row(op, db.ByOp[op]); err != nil {
			return err
		}
	}
	if err := row("= happy path", db.HappyPath()); err != nil {
		return err
	}
	for _, op := range slices.Sorted(maps.Keys(db.ByOp)) {
		if !happy[op] {
			label := "(not per job) " + op
			if alsoPerJob[op] {
				label = "(per job, not the goal's path) " + op
			}
			if err := row(label, db.ByOp[op]); err != nil {
				return err
			}
		}
	}
	if err := t.Render(); err != nil {
		return err
	}
	fmt.Fprintf(w, "database work: %d jobs committed, %d lease offers; the %d lease transactions beyond the offers answered "+
		"no_job (leases in flight as the queue ran dry; later ones are skipped by the gateway); counted by the server's "+
		"pool tracer (rendermac_db_* on /metrics)\n", db.Jobs, db.Offers, db.NoJobLeases())
	return nil
}

// printMix writes a statement mix, one row per statement.
func printMix(w io.Writer, what string, m StatementMix) error {
	if m.Error != "" || m.Jobs == 0 {
		fmt.Fprintf(w, "statement mix of the %s: not measured (%s)\n", what, m.Error)
		return nil
	}
	t := tablewriter.NewWriter(w)
	t.Header(fmt.Sprintf("statements per job of the %s, pg_stat_statements over %d jobs", what, m.Jobs),
		"calls/job", "rows/job", "mean ms")
	for _, s := range m.Statements {
		if err := t.Append(clip(s.Query, mixQueryChars), fmt.Sprintf("%.2f", s.CallsPerJob),
			fmt.Sprintf("%.2f", s.RowsPerJob), fmt.Sprintf("%.3f", s.MeanMS)); err != nil {
			return err
		}
	}
	if err := t.Append(fmt.Sprintf("= all statements, those under %.2f per job too, BEGIN/COMMIT/ROLLBACK aside (%.2f of them counted)",
		minCallsPerJob, m.TxControlPerJob), fmt.Sprintf("%.2f", m.PerJob),
		fmt.Sprintf("%.2f", m.RowsPerJob), fmt.Sprintf("%.3f ms/job", m.ExecMSPerJob)); err != nil {
		return err
	}
	return t.Render()
}

// mixQueryChars is how much of a statement's text the mix table shows
// (the JSON has all of it).
const mixQueryChars = 110

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

// FloorRatioFigure names the full stack's figure against the floor.
const FloorRatioFigure = "full stack whole jobs/s at peak (jobs / (submission + commit windows)) against the floor, each round's replay right after its peak"

// floorFigures are the stack against the replay of its own statement mix
// and against the round-trip limit, all at the peak's concurrency.
func (r *Result) floorFigures(add func(name, value, goal, met string)) {
	f := r.Floor
	name := fmt.Sprintf("Postgres floor: the peak's statement mix replayed (job.pgbench, -M prepared, %d clients)", f.Clients)
	if f.Error != "" || f.JobsPerS <= 0 {
		add(name, "not measured", "", "n/a: "+f.Error)
		return
	}
	v := fmt.Sprintf("%.0f jobs/s; %.2f statements per job (the stack's %.2f)", f.JobsPerS, f.ReplayMix.PerJob, r.Mix.PerJob)
	if c := f.CPU; c != nil && c.Error == "" {
		v += fmt.Sprintf("; CPU per job: Postgres %.2f + pgbench %.2f ms (%.2f cores busy)", c.PostgresMS, c.PgbenchMS, c.Busy)
	}
	add(name, v, "", "")
	met := "yes"
	if f.Ratio < GoalRatioVsFloor {
		met = fmt.Sprintf("NO: %.2f x short", GoalRatioVsFloor-f.Ratio)
	}
	rounds := make([]string, len(f.Rounds))
	for i, rd := range f.Rounds {
		rounds[i] = fmt.Sprintf("%.0f / %.0f = %.2f", rd.StackJobsPerS, rd.FloorJobsPerS, rd.StackJobsPerS/rd.FloorJobsPerS)
	}
	add(FloorRatioFigure,
		fmt.Sprintf("%.2f x floor, the median of %d rounds (stack / replay jobs/s: %s); round 1's commits/s alone %.0f, %.2f x",
			f.Ratio, len(f.Rounds), strings.Join(rounds, ", "), r.Peak.CommitsPerSec, r.Peak.CommitsPerSec/f.JobsPerS),
		fmt.Sprintf(">= %.1f x floor, median of the rounds", GoalRatioVsFloor), met)
	if c := r.Peak.CPU; c != nil && c.Error == "" {
		met = "yes"
		if c.PostgresMS > GoalPostgresMSPerJob {
			met = fmt.Sprintf("NO: %.2f ms over", c.PostgresMS-GoalPostgresMSPerJob)
		}
		floor := "n/a"
		if fc := f.CPU; fc != nil && fc.Error == "" {
			floor = fmt.Sprintf("%.2f", fc.PostgresMS)
		}
		whole := "n/a"
		if w := r.Peak.WholeCPU; w != nil && w.Error == "" {
			whole = fmt.Sprintf("%.2f", w.PostgresMS)
		}
		add("Postgres CPU per job at peak, lease to commit (with the create; the replay's, with the create)",
			fmt.Sprintf("%.2f ms (%s; %s)", c.PostgresMS, whole, floor), fmt.Sprintf("<= %.1f ms", GoalPostgresMSPerJob), met)
	}
	rt := float64(r.DB.HappyPath().RoundTrips) / float64(max(r.DB.Jobs, 1))
	add(fmt.Sprintf("round-trip limit: pgbench SELECT 1 at %d clients", f.Clients),
		fmt.Sprintf("%.0f tps; / %.2f statements per job = %.0f jobs/s if each were a round trip (the happy path's "+
			"round trips per job, pool tracer: %.2f)", f.Select1TPS, r.Mix.PerJob, f.Select1TPS/max(r.Mix.PerJob, 1), rt), "", "")
}

// campaignFigure is a differential campaign's rate beside the round-trip
// limit at its concurrency.
func campaignFigure(what string, c CampaignRate, goal float64) (name, value, goalS, met string) {
	name = fmt.Sprintf("%s steps/s (%d workers, %d steps per sequence)", what, c.Workers, c.StepsPerSq)
	goalS = fmt.Sprintf(">= %.0f", goal)
	value = fmt.Sprintf("%.0f (%d seqs in %.1f s, %d failures)", c.StepsPerS, c.Seeds, c.Seconds, c.Failures)
	if c.StatementsPerStep > 0 {
		value += fmt.Sprintf("; %.2f statements per step", c.StatementsPerStep)
	}
	if c.RoundTripsPerStep > 0 {
		value += fmt.Sprintf(", %.2f round trips", c.RoundTripsPerStep)
	}
	if c.Select1TPS > 0 {
		// The limit is per round trip: a pipelined batch is one.
		per, what := c.StatementsPerStep, "statements"
		if c.RoundTripsPerStep > 0 {
			per, what = c.RoundTripsPerStep, "round trips"
		}
		value += fmt.Sprintf("; SELECT 1 at %d clients %.0f tps = %.0f steps/s at that many %s", c.Workers,
			c.Select1TPS, c.Select1TPS/max(per, 1), what)
	}
	switch {
	case c.Failures > 0:
		met = fmt.Sprintf("%d FAILING sequences", c.Failures)
	case c.Error != "" && c.Steps == 0:
		return name, "not measured", goalS, "error: " + c.Error
	case c.StepsPerS < goal:
		met = fmt.Sprintf("NO: %.0f steps/s short", goal-c.StepsPerS)
	default:
		met = "yes"
	}
	if c.Error != "" {
		met += " (" + c.Error + ")"
	}
	return name, value, goalS, met
}

// printWrites writes the replay's row writes per job by table.
func printWrites(w io.Writer, f FloorResult) error {
	if len(f.Writes) == 0 {
		return nil
	}
	t := tablewriter.NewWriter(w)
	t.Header("replay's row writes per job (pg_stat_user_tables)", "inserts", "updates", "of them HOT", "not HOT", "indexes")
	for _, name := range slices.Sorted(maps.Keys(f.Writes)) {
		c := f.Writes[name]
		if err := t.Append(name, fmt.Sprintf("%.2f", c.Inserts), fmt.Sprintf("%.2f", c.Updates), fmt.Sprintf("%.2f", c.HOT),
			fmt.Sprintf("%.2f", c.Updates-c.HOT), c.Indexes); err != nil {
			return err
		}
	}
	return t.Render()
}
