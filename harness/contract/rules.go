package contract

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/rendermac/rendermac/docs"
)

// Rule is one normative statement of the contract: a refusal, a bound, an
// order, a state change, a header, a code, a retry or a limit, marked in
// docs/SPEC.md or docs/semantics.md by an anchor `[R:area.name]` at the end
// of the sentence that states it. Its id is stable: once given, it names
// the same statement for as long as the statement stands, wherever the
// text moves, so that checks, mutants and cards can name it.
type Rule struct {
	// ID is "area.name" (the anchor without its "[R:" and "]").
	ID string
	// File and Line cite where the anchor stands ("docs/SPEC.md", 97).
	File string
	Line int
	// Section is the heading the anchor stands under.
	Section string
	// Text is the statement: the text from the start of its paragraph,
	// list item or table row (or from the anchor before it there) up to
	// the anchor, whitespace folded.
	Text string
}

// Cite is "docs/SPEC.md:97".
func (r Rule) Cite() string { return fmt.Sprintf("%s:%d", r.File, r.Line) }

// ruleAnchor matches one anchor; ruleID is the id's form.
var (
	ruleAnchor = regexp.MustCompile(`\[R:([^\]\s]*)\]`)
	ruleID     = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*(\.[a-z0-9][a-z0-9-]*)+$`)
)

// ValidRuleID reports whether id has the form of a rule id ("area.name").
func ValidRuleID(id string) bool { return ruleID.MatchString(id) }

// Rules returns the rules of the contract this binary embeds, in the
// order of the text (SPEC first), or an error naming every malformed or
// repeated anchor.
func Rules() ([]Rule, error) { return ParseRules(docs.SPEC, docs.Semantics) }

// ParseRules finds the rule anchors of spec and semantics (the texts of
// docs/SPEC.md and docs/semantics.md). An anchor whose id is malformed, and
// an id given twice (in one document or across both), is an error naming
// each place: a rule must be one statement with one id.
func ParseRules(spec, semantics string) ([]Rule, error) {
	var out []Rule
	var problems []string
	seen := map[string]Rule{}
	for _, d := range []doc{{name: docs.SPECFile, text: spec}, {name: docs.SemanticsFile, text: semantics}} {
		rules, bad := d.rules()
		problems = append(problems, bad...)
		for _, r := range rules {
			if first, dup := seen[r.ID]; dup {
				problems = append(problems, fmt.Sprintf("%s: rule %s is given twice (first at %s)", r.Cite(), r.ID, first.Cite()))
				continue
			}
			seen[r.ID] = r
			out = append(out, r)
		}
	}
	if len(problems) > 0 {
		return out, fmt.Errorf("the contract's rule anchors:\n  %s", strings.Join(problems, "\n  "))
	}
	return out, nil
}

// rules reads d's anchors in order; bad lists the malformed ones.
func (d doc) rules() (rules []Rule, bad []string) {
	section := ""
	inFence := false
	lines := strings.Split(d.text, "\n")
	for i, l := range lines {
		trim := strings.TrimSpace(l)
		if strings.HasPrefix(trim, "```") {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		if strings.HasPrefix(trim, "#") {
			section = strings.TrimSpace(strings.TrimLeft(trim, "#"))
			continue
		}
		for _, m := range ruleAnchor.FindAllStringSubmatchIndex(l, -1) {
			if m[0] > 0 && l[m[0]-1] == '`' && m[1] < len(l) && l[m[1]] == '`' {
				continue // the anchor's form quoted as inline code, not a rule
			}
			id := l[m[2]:m[3]]
			if !ValidRuleID(id) {
				bad = append(bad, fmt.Sprintf("%s:%d: rule anchor [R:%s] is not of the form [R:area.name] (lower case, digits, dashes)", d.name, i+1, id))
				continue
			}
			rules = append(rules, Rule{ID: id, File: d.name, Line: i + 1, Section: section,
				Text: statement(lines, i, m[0])})
		}
	}
	return rules, bad
}

// statement is the text before the anchor at byte col of line i: back to
// the previous anchor in its block, or to the start of the block (a blank
// line, a heading, a list item, a table row).
func statement(lines []string, i, col int) string {
	parts := []string{lines[i][:col]}
	if !startsBlock(lines[i]) {
		for j := i - 1; j >= 0; j-- {
			l := lines[j]
			if strings.TrimSpace(l) == "" || strings.HasPrefix(strings.TrimSpace(l), "#") {
				break
			}
			parts = append(parts, l)
			if startsBlock(l) {
				break
			}
		}
	}
	slices.Reverse(parts)
	text := strings.Join(parts, " ")
	// Back to the anchor before this one, if the block holds one.
	if ms := ruleAnchor.FindAllStringIndex(text, -1); len(ms) > 0 {
		text = text[ms[len(ms)-1][1]:]
	}
	text = strings.Join(strings.Fields(text), " ")
	text = strings.TrimLeft(text, "-*|. ")
	return strings.TrimSpace(text)
}

// startsBlock: a list item or a table row begins a statement of its own.
func startsBlock(l string) bool {
	t := strings.TrimSpace(l)
	return strings.HasPrefix(t, "- ") || strings.HasPrefix(t, "* ") || strings.HasPrefix(t, "|") ||
		(len(t) > 2 && t[0] >= '0' && t[0] <= '9' && (strings.HasPrefix(t[1:], ". ") || strings.HasPrefix(t[2:], ". ")))
}
