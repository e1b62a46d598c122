package evidence

import (
	"fmt"
	"slices"
	"strings"
)

// Counts counts how often each key (a transition "from->to", a reply code,
// a fault kind) was reached. JSON writes its keys sorted.
type Counts map[string]int64

// Add sums o into c.
func (c Counts) Add(o Counts) {
	for k, n := range o {
		c[k] += n
	}
}

// Coverage is what one campaign reached, and what it had to reach. The
// count maps of shards of one campaign sum to the campaign's (Add); the
// required lists and tables are the same in every shard.
type Coverage struct {
	JobTransitions     Counts `json:"job_transitions"`
	AttemptTransitions Counts `json:"attempt_transitions"`
	// Replies counts reply codes, lease_conflict keyed with its reason
	// ("lease_conflict/phase_regression").
	Replies Counts `json:"replies"`
	Faults  Counts `json:"faults"`
	// FaultPhases counts faults of fenced frames by the status of the
	// attempt they hit ("stale_token@committing").
	FaultPhases Counts `json:"fault_phases"`
	// Required is what the gate demands; Unreached lists what is missing.
	Required CoverageRequired `json:"required"`
	// Tables are the matrices' axes and the transitions the tables allow.
	Tables CoverageTables `json:"tables"`
	// Gate is set when an unreached required cell fails the campaign
	// (qualify without --no-coverage-gate). A shard records it but leaves
	// the failing to Merge, which gates the summed coverage: a shard's
	// slice of the seeds need not reach every cell.
	Gate bool `json:"gate"`
}

// CoverageRequired lists the cells a campaign must reach.
type CoverageRequired struct {
	JobTransitions     []string `json:"job_transitions"`
	AttemptTransitions []string `json:"attempt_transitions"`
	Replies            []string `json:"replies"`
	Faults             []string `json:"faults"`
}

// CoverageTables are the state machines the transition matrices show: the
// statuses in table order and every transition the tables allow (a cell
// outside them is shown as not allowed), and the fault phases in order.
type CoverageTables struct {
	JobStatuses        []string `json:"job_statuses"`
	AttemptStatuses    []string `json:"attempt_statuses"`
	JobTransitions     []string `json:"job_transitions"`
	AttemptTransitions []string `json:"attempt_transitions"`
	FaultPhases        []string `json:"fault_phases"`
}

// Add sums o's counts into c (merging shards of one campaign). The required
// lists and tables are taken from o when c has none.
func (c *Coverage) Add(o Coverage) {
	for _, p := range []*Counts{&c.JobTransitions, &c.AttemptTransitions, &c.Replies, &c.Faults, &c.FaultPhases} {
		if *p == nil {
			*p = Counts{}
		}
	}
	c.JobTransitions.Add(o.JobTransitions)
	c.AttemptTransitions.Add(o.AttemptTransitions)
	c.Replies.Add(o.Replies)
	c.Faults.Add(o.Faults)
	c.FaultPhases.Add(o.FaultPhases)
	if c.Required.empty() {
		c.Required = o.Required
	}
	if len(c.Tables.JobStatuses) == 0 {
		c.Tables = o.Tables
	}
}

func (r CoverageRequired) empty() bool {
	return len(r.JobTransitions)+len(r.AttemptTransitions)+len(r.Replies)+len(r.Faults) == 0
}

// Unreached names every required cell never reached, by table, in the
// order job transitions, attempt transitions, replies, faults:
// "job transition verifying->cancelling", "reply lease_conflict/phase_regression",
// "fault stale_token".
func (c Coverage) Unreached() []string {
	var out []string
	check := func(what string, keys []string, got Counts) {
		for _, k := range keys {
			if got[k] == 0 {
				out = append(out, what+" "+k)
			}
		}
	}
	check("job transition", c.Required.JobTransitions, c.JobTransitions)
	check("attempt transition", c.Required.AttemptTransitions, c.AttemptTransitions)
	check("reply", c.Required.Replies, c.Replies)
	check("fault", c.Required.Faults, c.Faults)
	return out
}

// CoverageSource is the Failure.Source of a campaign's coverage gate:
// "coverage: NAME". A merge of shard cards drops these failures and asks
// CoverageFailure again of the summed coverage.
func CoverageSource(campaign string) string { return "coverage: " + campaign }

// CoverageFailure is the failure the coverage gate records for campaign,
// naming every unreached cell, or false when every required cell was
// reached.
func CoverageFailure(campaign string, c Coverage) (Failure, bool) {
	miss := c.Unreached()
	if len(miss) == 0 {
		return Failure{}, false
	}
	return Failure{Source: CoverageSource(campaign),
		Detail: fmt.Sprintf("%d required cells never reached: %s. The campaign checked nothing about them; "+
			"run more seeds or steps, or restore the generator weights that reach them (a smoke run too small to reach them all "+
			"can pass --no-coverage-gate, and its card then says the gate was off).", len(miss), strings.Join(miss, ", ")),
		Replay: "see the coverage matrix of " + campaign + " on this card"}, true
}

// matrixCell renders one transition cell: the count; "0 !" for a required
// cell never reached; "0" for an allowed, not required one; "·" for a
// transition the tables do not allow (with its count if one was somehow
// reached, which an invariant check would already have failed).
func matrixCell(key string, counts Counts, required, allowed []string) string {
	n := counts[key]
	switch {
	case n > 0:
		return fmt.Sprint(n)
	case slices.Contains(required, key):
		return "0 !"
	case slices.Contains(allowed, key):
		return "0"
	}
	return "·"
}

// transitionMatrix is one from x to table: a row per status that has an
// allowed transition out, a column per status.
func transitionMatrix(statuses, allowed, required []string, counts Counts) (header []string, rows [][]string) {
	header = append([]string{"from \\ to"}, statuses...)
	for _, from := range statuses {
		if !slices.ContainsFunc(allowed, func(t string) bool { return strings.HasPrefix(t, from+"->") }) {
			continue
		}
		row := []string{from}
		for _, to := range statuses {
			row = append(row, matrixCell(from+"->"+to, counts, required, allowed))
		}
		rows = append(rows, row)
	}
	return header, rows
}

// countRows lists keys (the required ones and every one reached, sorted)
// with their count, "0 !" for a required key never reached.
func countRows(counts Counts, required []string) [][]string {
	keys := slices.Clone(required)
	for k := range counts {
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	rows := make([][]string, 0, len(keys))
	for _, k := range keys {
		cell := fmt.Sprint(counts[k])
		if counts[k] == 0 && slices.Contains(required, k) {
			cell = "0 !"
		}
		rows = append(rows, []string{k, cell})
	}
	return rows
}

// faultRows is the fault table: a row per fault kind (required or
// reached) with its count ("0 !" if required and never reached) and its
// count at each phase.
func faultRows(c Coverage) (header []string, rows [][]string) {
	header = append([]string{"Fault", "Count"}, c.Tables.FaultPhases...)
	for _, r := range countRows(c.Faults, c.Required.Faults) {
		var at []string
		var phased int64
		for _, p := range c.Tables.FaultPhases {
			n := c.FaultPhases[r[0]+"@"+p]
			phased += n
			at = append(at, fmt.Sprint(n))
		}
		if phased == 0 { // not a fault of a fenced frame: it has no phase
			at = make([]string, len(at))
		}
		rows = append(rows, append(r, at...))
	}
	return header, rows
}
