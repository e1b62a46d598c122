package evidence

import (
	"bufio"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
)

// MutationScore is a source mutation campaign (rendermac mutate): each
// mutant is one small semantic change to the server's source, and the
// bounded qualify gate (and, where asked, the package tests) ran on it.
type MutationScore struct {
	// Gate is the qualify command each mutant was run through.
	Gate    string   `json:"gate"`
	Mutants []Mutant `json:"mutants"`
	// Killed counts mutants some check failed on; Total excludes invalid
	// ones (a mutant that does not build proves nothing).
	Killed int `json:"killed"`
	Total  int `json:"total"`
	// KilledByQualify counts those the qualify gate alone failed on.
	KilledByQualify int `json:"killed_by_qualify"`
}

// Mutant is one mutation and its outcome.
type Mutant struct {
	ID   string `json:"id"`
	Kind string `json:"kind"`
	File string `json:"file"`
	// What says in words what the mutation breaks.
	What string `json:"what"`
	// Rules are the contract's rules it breaks (docs/SPEC.md and
	// docs/semantics.md): its kill by qualify alone proves qualify checks them.
	Rules []string `json:"rules,omitempty"`
	// Outcome is "killed", "survived", "timeout" (counted killed, as
	// mutation tools do, but never as killed by qualify: see ByQualify) or
	// "invalid" (did not build, not counted).
	Outcome string `json:"outcome"`
	// KilledBy names what failed: qualify campaigns and scenarios, or
	// "test <package>: <TestName>".
	KilledBy   []string `json:"killed_by,omitempty"`
	Detail     string   `json:"detail,omitempty"`
	DurationMs int64    `json:"duration_ms,omitempty"`
	// Gate is which qualify run decided: "focused" (the checks that reach
	// the mutant's rules, at the bounded gate's sizes: mutate.FocusedArgs)
	// or "bounded" (the whole bounded gate).
	Gate string `json:"gate,omitempty"`
}

// Score is Killed/Total as a percentage (0 when nothing counted).
func (m MutationScore) Score() float64 {
	if m.Total == 0 {
		return 0
	}
	return 100 * float64(m.Killed) / float64(m.Total)
}

// ByQualify says whether the qualify gate alone failed on the mutant. A
// timeout does not count: qualify bounds its own waits (frames, scenarios,
// campaigns) and fails rather than hangs, so a gate that outlasts --timeout
// says the machine was slow, not that qualify would have caught the mutant.
func (mu Mutant) ByQualify() bool {
	return mu.Outcome == "killed" &&
		slices.ContainsFunc(mu.KilledBy, func(s string) bool { return !strings.HasPrefix(s, "test ") })
}

// PackageRows is the catalogue by package: how many mutants each package
// holds, how many were killed, and how many by the qualify gate alone (the
// card is the one gate, so the last two columns should be equal).
func PackageRows(m MutationScore) (header []string, rows [][]string) {
	header = []string{"Package", "Mutants", "Killed", "By qualify alone"}
	type count struct{ n, killed, byQualify int }
	counts := map[string]*count{}
	for _, mu := range m.Mutants {
		if mu.Outcome == "invalid" {
			continue
		}
		p := path.Dir(mu.File)
		if counts[p] == nil {
			counts[p] = &count{}
		}
		c := counts[p]
		c.n++
		if mu.Outcome == "killed" || mu.Outcome == "timeout" {
			c.killed++
		}
		if mu.ByQualify() {
			c.byQualify++
		}
	}
	pkgs := make([]string, 0, len(counts))
	for p := range counts {
		pkgs = append(pkgs, p)
	}
	slices.Sort(pkgs)
	for _, p := range pkgs {
		c := counts[p]
		rows = append(rows, []string{p, strconv.Itoa(c.n), strconv.Itoa(c.killed), strconv.Itoa(c.byQualify)})
	}
	return header, rows
}

// MutantRows is the table the Markdown card and the command's stdout show.
func MutantRows(m MutationScore) (header []string, rows [][]string) {
	header = []string{"ID", "Kind", "File", "Outcome", "Gate", "Killed by"}
	for _, mu := range m.Mutants {
		by := strings.Join(mu.KilledBy, "; ")
		if len(by) > 120 {
			by = by[:117] + "..."
		}
		rows = append(rows, []string{mu.ID, mu.Kind, mu.File, mu.Outcome, mu.Gate, by})
	}
	return header, rows
}

func mdMutations(w *bufio.Writer, c Card) error {
	m := c.MutationScore
	if m == nil {
		return nil
	}
	fmt.Fprint(w, "\n## Mutation score\n\n")
	fmt.Fprintf(w, "Score: **%d/%d killed (%.1f%%)**, %d by the qualify gate alone. Gate: %s\n\n",
		m.Killed, m.Total, m.Score(), m.KilledByQualify, code(m.Gate))
	header, rows := PackageRows(*m)
	if err := mdTable(w, header, rows); err != nil {
		return fmt.Errorf("mutation package table: %w", err)
	}
	fmt.Fprint(w, "\n")
	header, rows = MutantRows(*m)
	if err := mdTable(w, header, rows); err != nil {
		return fmt.Errorf("mutation table: %w", err)
	}
	fmt.Fprint(w, "\n")
	for _, mu := range m.Mutants {
		fmt.Fprintf(w, "- %s: %s\n", code(mu.ID), oneLine(mu.What))
	}
	return nil
}
