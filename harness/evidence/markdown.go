package evidence

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/renderer"
	"github.com/olekukonko/tablewriter/tw"
)

// WriteMarkdown writes the release manager's card: a heading with date and
// verdict, what was run, campaign and scenario tables, the invariants
// checked, every failure with its replay command, and what the run does not
// cover. The same card and options always give the same bytes.
func WriteMarkdown(w io.Writer, c Card, o WriteOptions) error {
	c, err := prepare(c, o)
	if err != nil {
		return err
	}
	// One buffered writer collects the first write error, so the section
	// writers below stay free of error plumbing; tablewriter's errors are
	// returned by mdTable and checked.
	bw := bufio.NewWriter(w)
	steps := []func(*bufio.Writer, Card) error{
		mdHeader, mdSummary, mdRules, mdRun, mdContract, mdCampaigns, mdScenarios, mdFleet, mdLinearizability, mdMutations, mdInvariants, mdFailures, mdNotCovered,
	}
	for _, step := range steps {
		if err := step(bw, c); err != nil {
			return fmt.Errorf("write markdown: %w", err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write markdown: %w", err)
	}
	return nil
}

func mdHeader(w *bufio.Writer, c Card) error {
	fmt.Fprintf(w, "# %s %s: %s\n\n", oneLine(c.Title), c.Date, c.Verdict())
	fmt.Fprintf(w, "**Verdict: %s.** %d campaigns, %d scenarios, %d invariants checked, %d failures.\n",
		c.Verdict(), len(c.Campaigns), len(c.Scenarios), len(c.Invariants), len(c.Failures))
	if c.NoTimings {
		fmt.Fprint(w, "Timings are omitted (deterministic mode).\n")
	}
	return nil
}

func mdRun(w *bufio.Writer, c Card) error {
	r := c.Run
	fmt.Fprint(w, "\n## What was run\n\n")
	fmt.Fprintf(w, "- Commit: %s\n", code(r.Commit))
	if r.Dirty {
		fmt.Fprint(w, "- Tree: dirty (uncommitted changes; the commit does not pin the code)\n")
	}
	fmt.Fprintf(w, "- Go version: %s\n", orUnknown(r.GoVersion))
	if r.SchemaVersion > 0 {
		fmt.Fprintf(w, "- Schema version: %d\n", r.SchemaVersion)
	} else {
		fmt.Fprint(w, "- Schema version: (not recorded)\n")
	}
	fmt.Fprintf(w, "- Model version: %s\n", code(r.ModelVersion))
	fmt.Fprintf(w, "- Generator version: %s\n", code(r.GeneratorVersion))
	if r.GeneratorWeights != "" {
		fmt.Fprintf(w, "- Generator weights: %s\n", code(r.GeneratorWeights))
	}
	fmt.Fprintf(w, "- Postgres version: %s\n", orUnknown(r.PostgresVersion))
	fmt.Fprintf(w, "- Postgres kind: %s\n", orUnknown(r.PostgresKind))
	fmt.Fprintf(w, "- Host: %s\n", orUnknown(r.Host))
	fmt.Fprintf(w, "- Command: %s\n", code(r.Command))
	fmt.Fprintf(w, "- First seed: %d\n", r.FirstSeed)
	if r.Shard != "" {
		fmt.Fprintf(w, "- Shard: %s (this card holds only that slice of the seeds and scenarios; `rendermac card merge` joins the shards)\n", r.Shard)
	}
	if !c.NoTimings {
		fmt.Fprintf(w, "- Run time: %s\n", duration(r.DurationMs))
	}
	return nil
}

func mdCampaigns(w *bufio.Writer, c Card) error {
	fmt.Fprint(w, "\n## Campaigns\n\n")
	if len(c.Campaigns) == 0 {
		fmt.Fprint(w, "None.\n")
		return nil
	}
	header := []string{"Name", "Target", "Seeds", "Steps/sequence", "Steps", "Divergences", "Violations", "Errors", "Verdict"}
	rows := make([][]string, 0, len(c.Campaigns))
	for _, cp := range c.Campaigns {
		target := cp.Target
		if cp.ArtifactStore != "" {
			target += " (artifacts: " + cp.ArtifactStore + ")"
		}
		rows = append(rows, []string{cp.Name, target, itoa(cp.Seeds), itoa(cp.StepsPerSeq), itoa(cp.Steps),
			itoa(cp.Divergences), itoa(cp.Violations), itoa(cp.Errors), verdict(cp.Passed)})
	}
	header, rows = withDuration(header, rows, c.NoTimings, func(i int) int64 { return c.Campaigns[i].DurationMs })
	if err := mdTable(w, header, rows, 2, 3, 4, 5, 6, 7); err != nil {
		return fmt.Errorf("campaigns table: %w", err)
	}
	mdTokens(w, c)
	for _, cp := range c.Campaigns {
		if cp.Coverage != nil {
			continue // its coverage section lists replies, with reasons
		}
		fmt.Fprintf(w, "\n### Reply codes: %s\n\n", oneLine(cp.Name))
		if len(cp.Replies) == 0 {
			fmt.Fprint(w, "None recorded.\n")
			continue
		}
		rows := [][]string{}
		for _, code := range sortedCodes(cp.Replies) {
			rows = append(rows, []string{code, itoa(cp.Replies[code])})
		}
		if err := mdTable(w, []string{"Code", "Count"}, rows, 1); err != nil {
			return fmt.Errorf("reply codes of %s: %w", cp.Name, err)
		}
	}
	for _, cp := range c.Campaigns {
		if cp.Coverage != nil {
			if err := mdCoverage(w, cp.Name, *cp.Coverage); err != nil {
				return fmt.Errorf("coverage of %s: %w", cp.Name, err)
			}
		}
	}
	return nil
}

// mdCoverage writes a campaign's coverage matrix: job and attempt
// transitions (from x to), replies and faults by phase. "0 !" marks a
// required cell never reached, "·" a transition the tables do not allow.
func mdCoverage(w *bufio.Writer, name string, cov Coverage) error {
	fmt.Fprintf(w, "\n### Coverage: %s\n\n", oneLine(name))
	if miss := cov.Unreached(); len(miss) > 0 {
		fmt.Fprintf(w, "**Coverage gate: FAIL.** Never reached: %s.\n", strings.Join(miss, ", "))
	} else {
		fmt.Fprint(w, "Coverage gate: PASS, every required cell reached.\n")
	}
	fmt.Fprint(w, "`0 !` is a required cell never reached; `0` an allowed transition the gate does not require; `·` a transition the tables do not allow.\n")
	t := cov.Tables
	for _, m := range []struct {
		title                     string
		statuses, allowed, needed []string
		counts                    Counts
	}{
		{"Job transitions", t.JobStatuses, t.JobTransitions, cov.Required.JobTransitions, cov.JobTransitions},
		{"Attempt transitions", t.AttemptStatuses, t.AttemptTransitions, cov.Required.AttemptTransitions, cov.AttemptTransitions},
	} {
		fmt.Fprintf(w, "\n%s (from \\ to):\n\n", m.title)
		header, rows := transitionMatrix(m.statuses, m.allowed, m.needed, m.counts)
		if err := mdTable(w, header, rows, countColumns(len(header))...); err != nil {
			return err
		}
	}
	fmt.Fprint(w, "\nReplies:\n\n")
	if err := mdTable(w, []string{"Reply", "Count"}, countRows(cov.Replies, cov.Required.Replies), 1); err != nil {
		return err
	}
	fmt.Fprint(w, "\nFaults, by the phase of the attempt a fenced frame hit:\n\n")
	header, rows := faultRows(cov)
	return mdTable(w, header, rows, countColumns(len(header))...)
}

// countColumns lists columns 1..n-1, the count columns of a matrix.
func countColumns(n int) []int {
	cols := make([]int, 0, n)
	for i := 1; i < n; i++ {
		cols = append(cols, i)
	}
	return cols
}

func mdScenarios(w *bufio.Writer, c Card) error {
	fmt.Fprint(w, "\n## Scenarios\n\n")
	if len(c.Scenarios) == 0 {
		fmt.Fprint(w, "None.\n")
		return nil
	}
	header := []string{"Name", "Injected fault", "Phase", "Expected", "Observed", "Verdict"}
	rows := make([][]string, 0, len(c.Scenarios))
	for _, s := range c.Scenarios {
		rows = append(rows, []string{s.Key(), s.Fault, s.Phase, s.Expected, s.Observed, verdict(s.Passed)})
	}
	header, rows = withDuration(header, rows, c.NoTimings, func(i int) int64 { return c.Scenarios[i].DurationMs })
	if err := mdTable(w, header, rows); err != nil {
		return fmt.Errorf("scenarios table: %w", err)
	}
	return nil
}

func mdInvariants(w *bufio.Writer, c Card) error {
	fmt.Fprint(w, "\n## Invariants checked\n\n")
	if len(c.Invariants) == 0 {
		fmt.Fprint(w, "None.\n")
	}
	for _, inv := range c.Invariants {
		fmt.Fprintf(w, "%d. %s\n", inv.Number, oneLine(inv.Text))
	}
	return nil
}

func mdFailures(w *bufio.Writer, c Card) error {
	fmt.Fprint(w, "\n## Failures\n\n")
	if len(c.Failures) == 0 {
		fmt.Fprint(w, "None.\n")
	}
	for i, f := range c.Failures {
		if i > 0 {
			fmt.Fprint(w, "\n")
		}
		fmt.Fprintf(w, "### %d. %s\n\n%s\n\nReplay:\n\n", i+1, oneLine(failureTitle(f)), strings.TrimSpace(f.Detail))
		fence := codeFence(f.Replay)
		fmt.Fprintf(w, "%ssh\n%s\n%s\n", fence, strings.TrimSpace(f.Replay), fence)
	}
	return nil
}

func mdNotCovered(w *bufio.Writer, c Card) error {
	fmt.Fprint(w, "\n## Not covered by this run\n\n")
	if len(c.NotCovered) == 0 {
		fmt.Fprint(w, "Nothing listed.\n")
	}
	for _, s := range c.NotCovered {
		fmt.Fprintf(w, "- %s\n", oneLine(s))
	}
	return nil
}

// withDuration appends the Duration column unless timings are off, in which
// case the column is left out entirely rather than shown empty.
func withDuration(header []string, rows [][]string, noTimings bool, ms func(int) int64) ([]string, [][]string) {
	if noTimings {
		return header, rows
	}
	for i := range rows {
		rows[i] = append(rows[i], duration(ms(i)))
	}
	return append(header, "Duration"), rows
}

// mdTable renders one GitHub-flavoured Markdown table. Headers are kept as
// written (tablewriter upper-cases them by default), nothing wraps (a wrapped
// cell would become a second, broken table row), and the columns listed in
// right are right-aligned because they hold counts.
func mdTable(w io.Writer, header []string, rows [][]string, right ...int) error {
	align := make([]tw.Align, len(header))
	for i := range align {
		align[i] = tw.AlignLeft
	}
	for _, i := range right {
		align[i] = tw.AlignRight
	}
	t := tablewriter.NewTable(w, tablewriter.WithRenderer(renderer.NewMarkdown()))
	t.Configure(func(cfg *tablewriter.Config) {
		cfg.Header.Formatting.AutoFormat = tw.Off
		cfg.Header.Formatting.AutoWrap = tw.WrapNone
		cfg.Header.Alignment.Global = tw.AlignLeft
		cfg.Row.Formatting.AutoWrap = tw.WrapNone
		cfg.Row.Alignment.PerColumn = align
	})
	t.Header(header)
	for _, row := range rows {
		cells := make([]string, len(row))
		for i, cell := range row {
			cells[i] = mdCell(cell)
		}
		if err := t.Append(cells); err != nil {
			return err
		}
	}
	return t.Render()
}

// mdCell keeps a value inside its cell: tablewriter does not escape the
// column separator, and a newline would end the row.
func mdCell(s string) string {
	return strings.ReplaceAll(oneLine(s), "|", `\|`)
}

// code renders s as inline code with a backtick run longer than any inside
// it, so commit hashes and commands copy-paste exactly.
func code(s string) string {
	if s == "" {
		return orUnknown(s)
	}
	ticks := strings.Repeat("`", longestRun(s, '`')+1)
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") {
		return ticks + " " + s + " " + ticks
	}
	return ticks + s + ticks
}

// codeFence returns a fence that no backtick run inside s can close early.
func codeFence(s string) string {
	return strings.Repeat("`", max(3, longestRun(s, '`')+1))
}

func longestRun(s string, r rune) int {
	best, run := 0, 0
	for _, c := range s {
		if c != r {
			run = 0
			continue
		}
		run++
		best = max(best, run)
	}
	return best
}

func orUnknown(s string) string {
	if s = oneLine(s); s == "" {
		return "(not recorded)"
	}
	return s
}

func itoa(n int) string { return strconv.Itoa(n) }
