package evidence

import (
	"bufio"
	"fmt"
	"strings"
)

// Verdicts a card can read. A run that passed everything it ran but did
// not run all it could (scenarios skipped, rules unchecked, the coverage
// gate off, an unknown commit) is not a plain PASS: its card says
// "PASS (incomplete)" and lists the gaps first. Only Passed decides the
// exit status; the word is for the reader.
const (
	VerdictPass       = "PASS"
	VerdictIncomplete = "PASS (incomplete)"
	VerdictFail       = "FAIL"
)

// Verdict is what the card's title and summary say of the run.
func (c Card) Verdict() string {
	switch {
	case !c.Passed:
		return VerdictFail
	case len(c.Gaps()) > 0:
		return VerdictIncomplete
	}
	return VerdictPass
}

// SkippedNote is the not-covered note of a scenario that could not run;
// Gaps counts the notes of this form.
func SkippedNote(scenario string, why error) string {
	return fmt.Sprintf("Scenario %s was not run: %v.", scenario, why)
}

func isSkippedNote(note string) bool {
	return strings.HasPrefix(note, "Scenario ") && strings.Contains(note, " was not run: ")
}

// Gaps lists, one line each, what this run did not do that a reader of a
// PASS must know: scenarios it could not run, rules of the contract no
// check of this run reached, campaigns without the coverage gate, and a
// commit the card cannot name.
func (c Card) Gaps() []string {
	var gaps []string
	if c.MutationScore != nil {
		return nil
	}
	switch {
	case c.Run.Commit == "" || c.Run.Commit == "unknown":
		gaps = append(gaps, "the commit is unknown: the card does not say which code it qualified (build from a git checkout)")
	case c.Run.Dirty:
		gaps = append(gaps, "the tree had uncommitted changes: the commit does not pin the code")
	}
	var skipped []string
	for _, n := range c.NotCovered {
		if isSkippedNote(n) {
			name, _, _ := strings.Cut(strings.TrimPrefix(n, "Scenario "), " ")
			skipped = append(skipped, name)
		}
	}
	if len(skipped) > 0 {
		gaps = append(gaps, fmt.Sprintf("%d scenarios were not run (%s): see \"Not covered by this run\"", len(skipped), strings.Join(skipped, ", ")))
	}
	if c.Rules != nil {
		if un := c.Rules.Unchecked(); len(un) > 0 {
			gaps = append(gaps, fmt.Sprintf("%d of the contract's %d rules were not checked by this run: see \"Rules\"", len(un), c.Rules.Total))
		}
	}
	var ungated []string
	for _, cp := range c.Campaigns {
		if cp.Coverage != nil && !cp.Coverage.Gate && cp.Sequences > 0 {
			ungated = append(ungated, cp.Name)
		}
	}
	if len(ungated) > 0 && c.Run.Shard == "" {
		gaps = append(gaps, "the coverage gate was off (--no-coverage-gate) for "+strings.Join(ungated, ", "))
	}
	return gaps
}

// mdSummary writes the first screen: the verdict, each failure in one
// line with its replay command, and the gaps.
func mdSummary(w *bufio.Writer, c Card) error {
	fmt.Fprint(w, "\n## Summary\n\n")
	if len(c.Failures) == 0 {
		fmt.Fprint(w, "- Failures: none.\n")
	}
	for i, f := range c.Failures {
		fmt.Fprintf(w, "- Failure %d. %s: %s. Replay: %s\n", i+1, oneLine(failureTitle(f)), firstSentence(f.Detail), code(oneLine(f.Replay)))
	}
	for _, g := range c.Gaps() {
		fmt.Fprintf(w, "- Not done: %s.\n", g)
	}
	fmt.Fprint(w, "- Sections: the Fleet section is a live measurement of real processes (its counts vary between runs); "+
		"every other section is reproducible: with --no-timings, the same commit and flags give the same content.\n")
	return nil
}

// firstSentence keeps a failure's detail to its first line, bounded.
func firstSentence(s string) string {
	s = oneLine(strings.SplitN(strings.TrimSpace(s), "\n", 2)[0])
	if len(s) > 240 {
		s = s[:237] + "..."
	}
	return strings.TrimSuffix(s, ".")
}
