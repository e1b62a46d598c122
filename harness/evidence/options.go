package evidence

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"
)

// WriteOptions controls every writer in this package the same way.
type WriteOptions struct {
	// NoTimings leaves every duration out (Markdown, JUnit, HTML) or zeroes
	// it (JSON, whose field set stays fixed for consumers), so that two runs
	// of the same commit and seeds give byte-identical files.
	NoTimings bool
}

// defaultTitle heads a card whose caller left Title empty.
const defaultTitle = "Phase-fault qualification"

// dateLayout is the only accepted form of Card.Date: it names the files, so
// anything looser could produce odd or escaping paths.
var dateLayout = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}$`)

// Validate reports a card that would render misleading evidence: a date that
// cannot name files, or a PASS verdict next to a failing campaign, scenario
// or recorded failure. Every writer calls it, because a release manager reads
// the heading first and a false PASS there is the worst thing a card can say.
// The opposite (FAIL with everything passing) is allowed: it is conservative.
func (c Card) Validate() error {
	if !dateLayout.MatchString(c.Date) {
		return fmt.Errorf("evidence: date %q is not YYYY-MM-DD", c.Date)
	}
	if _, err := time.Parse(time.DateOnly, c.Date); err != nil {
		return fmt.Errorf("evidence: date %q: %w", c.Date, err)
	}
	if !c.Passed {
		return nil
	}
	for _, cp := range c.Campaigns {
		if !cp.Passed {
			return fmt.Errorf("evidence: card says PASS but campaign %q failed", cp.Name)
		}
	}
	for _, k := range c.Contract {
		if !k.Passed {
			return fmt.Errorf("evidence: card says PASS but contract table %q disagrees", k.Table)
		}
	}
	for _, s := range c.Scenarios {
		if !s.Passed {
			return fmt.Errorf("evidence: card says PASS but scenario %q failed", s.Name)
		}
	}
	if len(c.Failures) > 0 {
		return fmt.Errorf("evidence: card says PASS but lists %d failures", len(c.Failures))
	}
	return nil
}

// prepare validates c and returns the copy every writer renders: durations
// zeroed and NoTimings set when either the options or the card itself ask for
// it (a card read back from a NoTimings JSON stays timing-free), nil slices
// and maps made empty so JSON says [] and {} rather than null, and
// invariants in number order. Slices are copied so the caller's card is
// never modified.
func prepare(c Card, o WriteOptions) (Card, error) {
	if err := c.Validate(); err != nil {
		return Card{}, err
	}
	c = normalize(c)
	if c.Title == "" {
		c.Title = defaultTitle
	}
	c.Scenarios = slices.Clone(c.Scenarios)
	c.Invariants = slices.Clone(c.Invariants)
	slices.SortStableFunc(c.Invariants, func(a, b Invariant) int { return a.Number - b.Number })
	if o.NoTimings || c.NoTimings {
		c.NoTimings = true
		c.Run.DurationMs = 0
		for i := range c.Campaigns {
			c.Campaigns[i].DurationMs = 0
		}
		for i := range c.Scenarios {
			c.Scenarios[i].DurationMs = 0
		}
		if c.Fleet != nil {
			f := *c.Fleet
			f.LoadMs, f.WastedMs, f.DrainMs, f.DrainBoundMs = 0, 0, 0, 0
			f.PrimaryLosses = append([]PrimaryLoss(nil), f.PrimaryLosses...)
			for i := range f.PrimaryLosses {
				f.PrimaryLosses[i].OutageMs = 0
			}
			c.Fleet = &f
		}
		if c.Linearizability != nil {
			l := *c.Linearizability
			l.Histories, l.Operations, l.Recorded, l.Longest, l.RunMs, l.CheckMs = 0, 0, 0, 0, 0, 0
			c.Linearizability = &l
		}
	}
	return c, nil
}

// normalize makes nil collections empty. It is shared by the JSON writer and
// reader so that a written card reads back equal to what was rendered.
func normalize(c Card) Card {
	// Campaigns is cloned because Replies may be filled in below and the
	// caller's card must not change.
	c.Campaigns = slices.Clone(nonNil(c.Campaigns))
	for i := range c.Campaigns {
		if c.Campaigns[i].Replies == nil {
			c.Campaigns[i].Replies = map[string]int{}
		}
		if cov := c.Campaigns[i].Coverage; cov != nil {
			n := *cov
			n.Add(Coverage{}) // allocates nil count maps: JSON says {}, not null
			for _, l := range []*[]string{&n.Required.JobTransitions, &n.Required.AttemptTransitions, &n.Required.Replies,
				&n.Required.Faults, &n.Tables.JobStatuses, &n.Tables.AttemptStatuses, &n.Tables.JobTransitions,
				&n.Tables.AttemptTransitions, &n.Tables.FaultPhases} {
				*l = nonNil(*l)
			}
			c.Campaigns[i].Coverage = &n
		}
	}
	c.Scenarios = nonNil(c.Scenarios)
	c.Invariants = nonNil(c.Invariants)
	c.Failures = nonNil(c.Failures)
	c.NotCovered = nonNil(c.NotCovered)
	return c
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// verdict is the one word every format uses for a pass or fail.
func verdict(passed bool) string {
	if passed {
		return "PASS"
	}
	return "FAIL"
}

// duration renders milliseconds the way Go prints durations ("1.5s",
// "850ms"), which release managers and CI logs already read.
func duration(ms int64) string {
	return (time.Duration(ms) * time.Millisecond).String()
}

// sortedCodes returns reply codes in byte order, the one order every format
// and Diff use, so map iteration order never reaches the output.
func sortedCodes(m map[string]int) []string {
	return slices.Sorted(maps.Keys(m))
}

// failureTitle names a failure by its source and, for campaigns, its seed.
func failureTitle(f Failure) string {
	if f.Seed != 0 {
		return fmt.Sprintf("%s seed %d", f.Source, f.Seed)
	}
	return f.Source
}

// oneLine folds a multi-line value into one line for table cells and
// attributes, where a newline would break the layout.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
