package evidence

import (
	"bufio"
	"fmt"
	"strings"
)

// Rules is the contract's rule inventory as one qualification run saw it:
// every normative statement of docs/SPEC.md and docs/semantics.md (an
// `[R:area.name]` anchor), the checks of qualify that reach it and whether
// this run ran them, and whether the last mutation card proves the checks
// have teeth for it.
type Rules struct {
	// Total is the number of rules in the contract.
	Total int `json:"total"`
	// Checked counts the rules at least one of whose checks ran.
	Checked int `json:"checked"`
	// Proven counts the rules with a mutant in the mutation card, each of
	// whose mutants there was killed by qualify alone.
	Proven int `json:"proven"`
	// MutationCard names the mutation card the proofs come from (its date
	// and commit), or says why none was read.
	MutationCard string `json:"mutation_card"`
	// Rows is every rule, in the contract's order.
	Rows []RuleRow `json:"rows"`
}

// RuleRow is one rule of the inventory.
type RuleRow struct {
	ID string `json:"id"`
	// Source cites the anchor ("docs/SPEC.md:97").
	Source string `json:"source"`
	// Text is the statement, folded to one line.
	Text string `json:"text"`
	// Checks are the checks that reach the rule, and whether each ran.
	Checks []RuleCheck `json:"checks"`
	// Mutants are the catalogue's mutants that break it.
	Mutants []string `json:"mutants,omitempty"`
	// Proven is set when the mutation card killed each of Mutants by
	// qualify alone (and holds at least one).
	Proven bool `json:"proven"`
	// NotCheckable says why no check of qualify can reach the rule.
	NotCheckable string `json:"not_checkable,omitempty"`
}

// RuleCheck is one check of a rule and whether this run ran it.
type RuleCheck struct {
	Name string `json:"name"`
	Ran  bool   `json:"ran"`
	// Why says why it did not run (a flag, a shard, a missing tool).
	Why string `json:"why,omitempty"`
}

// Checked reports whether one of the rule's checks ran.
func (r RuleRow) Checked() bool {
	for _, c := range r.Checks {
		if c.Ran {
			return true
		}
	}
	return false
}

// NotCheckedWhy says why this run did not check the rule: the reasons of
// its checks that did not run, or that no check reaches it.
func (r RuleRow) NotCheckedWhy() string {
	if r.NotCheckable != "" {
		return "not checkable here: " + r.NotCheckable
	}
	if len(r.Checks) == 0 {
		return "no check of qualify reaches it"
	}
	var why []string
	for _, c := range r.Checks {
		if !c.Ran && c.Why != "" && !contains(why, c.Name+": "+c.Why) {
			why = append(why, c.Name+": "+c.Why)
		}
	}
	return strings.Join(why, "; ")
}

// Unchecked lists the rules this run did not check that a check could
// have: the ones a verdict must own up to.
func (r Rules) Unchecked() []RuleRow {
	var out []RuleRow
	for _, row := range r.Rows {
		if !row.Checked() && row.NotCheckable == "" {
			out = append(out, row)
		}
	}
	return out
}

// Count sets Total, Checked and Proven from the rows.
func (r *Rules) Count() {
	r.Total, r.Checked, r.Proven = len(r.Rows), 0, 0
	for _, row := range r.Rows {
		if row.Checked() {
			r.Checked++
		}
		if row.Proven {
			r.Proven++
		}
	}
}

// Summary is the rules' line under the verdict.
func (r Rules) Summary() string {
	s := fmt.Sprintf("%d rules in the contract, %d checked by this run, %d proven by a mutant killed by qualify alone",
		r.Total, r.Checked, r.Proven)
	if n := len(r.Unchecked()); n > 0 {
		s += fmt.Sprintf("; %d not checked by this run", n)
	}
	return s
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// mdRules writes the Rules section: the counts, every rule this run did
// not check with why, the rules no check can reach with why, then the
// whole inventory folded.
func mdRules(w *bufio.Writer, c Card) error {
	if c.Rules == nil {
		return nil
	}
	r := *c.Rules
	fmt.Fprint(w, "\n## Rules\n\n")
	fmt.Fprintf(w, "%s (docs/SPEC.md and docs/semantics.md, `rendermac rules` lists them). Proofs: %s.\n",
		r.Summary(), oneLine(r.MutationCard))
	if un := r.Unchecked(); len(un) > 0 {
		fmt.Fprint(w, "\nNot checked by this run:\n\n")
		rows := make([][]string, 0, len(un))
		for _, row := range un {
			rows = append(rows, []string{row.ID, row.NotCheckedWhy()})
		}
		if err := mdTable(w, []string{"Rule", "Why"}, rows); err != nil {
			return fmt.Errorf("unchecked rules: %w", err)
		}
	}
	var nc [][]string
	for _, row := range r.Rows {
		if row.NotCheckable != "" {
			nc = append(nc, []string{row.ID, row.NotCheckable})
		}
	}
	if len(nc) > 0 {
		fmt.Fprint(w, "\nNot checkable here:\n\n")
		if err := mdTable(w, []string{"Rule", "Why"}, nc); err != nil {
			return fmt.Errorf("not checkable rules: %w", err)
		}
	}
	fmt.Fprint(w, "\n<details><summary>Every rule, its checks and its mutants</summary>\n\n")
	rows := make([][]string, 0, len(r.Rows))
	for _, row := range r.Rows {
		var checks []string
		for _, ck := range row.Checks {
			mark := ""
			if !ck.Ran {
				mark = " (not run)"
			}
			checks = append(checks, ck.Name+mark)
		}
		proven := "no"
		if row.Proven {
			proven = "yes"
		}
		rows = append(rows, []string{row.ID, code(row.Source), strings.Join(checks, ", "), strings.Join(row.Mutants, ", "), proven})
	}
	if err := mdTable(w, []string{"Rule", "Stated at", "Checks", "Mutants", "Proven"}, rows); err != nil {
		return fmt.Errorf("rules table: %w", err)
	}
	fmt.Fprint(w, "\n</details>\n")
	return nil
}
