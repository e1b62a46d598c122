package evidence

import (
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"slices"
)

//go:embed card.html.tmpl
var cardHTML string

// htmlTemplate is parsed once; html/template escapes every value by its
// context (text, attribute, CSS), which is why no value is marked safe.
var htmlTemplate = template.Must(template.New("card").Funcs(template.FuncMap{
	"verdict": verdict,
	"dur":     duration,
	"inc":     func(i int) int { return i + 1 },
	"title":   failureTitle,
	"first":   firstSentence,
}).Parse(cardHTML))

// lanes are the timeline's fixed rows, top to bottom, as the work flows.
var lanes = []string{"agent", "gateway", "database"}

type htmlPage struct {
	Card    Card
	Verdict string
	// VerdictClass styles the verdict: PASS, INCOMPLETE or FAIL.
	VerdictClass string
	Gaps         []string
	Timings      bool
	Scenarios    []htmlScenario
	Coverage     []htmlCoverage
}

// htmlCoverage is one campaign's coverage matrix, as the Markdown card's.
type htmlCoverage struct {
	Name      string
	Unreached []string
	Tables    []htmlTable
}

// htmlTable is a titled table of text cells; "0 !" cells are highlighted.
type htmlTable struct {
	Title  string
	Header []string
	Rows   [][]string
}

func coverageTables(name string, cov Coverage) htmlCoverage {
	t := cov.Tables
	jh, jr := transitionMatrix(t.JobStatuses, t.JobTransitions, cov.Required.JobTransitions, cov.JobTransitions)
	ah, ar := transitionMatrix(t.AttemptStatuses, t.AttemptTransitions, cov.Required.AttemptTransitions, cov.AttemptTransitions)
	fh, fr := faultRows(cov)
	return htmlCoverage{Name: name, Unreached: cov.Unreached(), Tables: []htmlTable{
		{Title: "Job transitions", Header: jh, Rows: jr},
		{Title: "Attempt transitions", Header: ah, Rows: ar},
		{Title: "Replies", Header: []string{"Reply", "Count"}, Rows: countRows(cov.Replies, cov.Required.Replies)},
		{Title: "Faults, by the phase of the attempt a fenced frame hit", Header: fh, Rows: fr},
	}}
}

type htmlScenario struct {
	Scenario
	Timeline *htmlTimeline
}

// htmlTimeline is a grid: one column per distinct step (in step order, so
// sparse step numbers do not leave empty columns) and one row per lane.
type htmlTimeline struct {
	Steps []int
	Lanes []htmlLane
}

type htmlLane struct {
	Name  string
	Class string
	// Cells holds, per step column, the labels of the lane's events there.
	Cells [][]string
}

// WriteHTML writes one self-contained page (inline CSS, no scripts, no
// external resources) with the Markdown card's content and, per scenario, a
// timeline of agent, gateway and database lanes in which every event is a
// box at its step's column. Every value is HTML-escaped.
func WriteHTML(w io.Writer, c Card, o WriteOptions) error {
	c, err := prepare(c, o)
	if err != nil {
		return err
	}
	page := htmlPage{Card: c, Verdict: c.Verdict(), VerdictClass: verdictClass(c.Verdict()), Gaps: c.Gaps(), Timings: !c.NoTimings}
	for _, s := range c.Scenarios {
		page.Scenarios = append(page.Scenarios, htmlScenario{Scenario: s, Timeline: timeline(s.Timeline)})
	}
	for _, cp := range c.Campaigns {
		if cp.Coverage != nil {
			page.Coverage = append(page.Coverage, coverageTables(cp.Name, *cp.Coverage))
		}
	}
	if err := htmlTemplate.Execute(w, page); err != nil {
		return fmt.Errorf("write html: %w", err)
	}
	return nil
}

// timeline lays events out on the grid, or returns nil when there are none.
// Events in a lane other than the three known ones get their own row after
// them (sorted by name) rather than being dropped.
func timeline(events []TimelineEvent) *htmlTimeline {
	if len(events) == 0 {
		return nil
	}
	var stepNums []int
	var extra []string
	for _, e := range events {
		stepNums = append(stepNums, e.Step)
		if !slices.Contains(lanes, e.Lane) {
			extra = append(extra, e.Lane)
		}
	}
	slices.Sort(stepNums)
	stepNums = slices.Compact(stepNums)
	slices.Sort(extra)
	extra = slices.Compact(extra)
	col := map[int]int{}
	for i, s := range stepNums {
		col[s] = i
	}
	t := &htmlTimeline{Steps: stepNums}
	row := map[string]int{}
	for i, name := range append(slices.Clone(lanes), extra...) {
		class := name
		if i >= len(lanes) {
			class = "other"
		}
		row[name] = i
		t.Lanes = append(t.Lanes, htmlLane{Name: name, Class: class, Cells: make([][]string, len(stepNums))})
	}
	// Events keep their given order within a cell, so simultaneous events
	// read in the order the harness recorded them.
	for _, e := range events {
		cells := t.Lanes[row[e.Lane]].Cells
		cells[col[e.Step]] = append(cells[col[e.Step]], e.Label)
	}
	return t
}

func verdictClass(v string) string {
	if v == VerdictIncomplete {
		return "INCOMPLETE"
	}
	return v
}
