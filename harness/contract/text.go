package contract

import (
	"fmt"
	"regexp"
	"strings"
)

// doc is one document of the contract, searched by regular expressions
// whose matches are cited by line.
type doc struct {
	name, text string
}

// line is the 1-based line of byte offset off.
func (d doc) line(off int) int { return strings.Count(d.text[:off], "\n") + 1 }

// at cites byte offset off as "docs/SPEC.md:97".
func (d doc) at(off int) string { return fmt.Sprintf("%s:%d", d.name, d.line(off)) }

// find returns the first match of anchor (its submatch offsets), or an error
// saying what was looked for and where.
func (d doc) find(anchor *regexp.Regexp, what string) ([]int, error) {
	m := anchor.FindStringSubmatchIndex(d.text)
	if m == nil {
		return nil, fmt.Errorf("%s: cannot find %s (no text matches %q): the contract's text moved, so the check cannot read it",
			d.name, what, anchor.String())
	}
	return m, nil
}

// backticked matches `name` spans.
var backticked = regexp.MustCompile("`([^`]+)`")

// listAfter returns the backticked names between the end of anchor's match
// and the first stop byte outside backticks, and the citation of the
// anchor's line.
func (d doc) listAfter(anchor *regexp.Regexp, stop byte, what string) ([]string, string, error) {
	m, err := d.find(anchor, what)
	if err != nil {
		return nil, "", err
	}
	start, end := m[1], -1
	in := false
	for i := start; i < len(d.text); i++ {
		switch c := d.text[i]; {
		case c == '`':
			in = !in
		case c == stop && !in:
			end = i
		}
		if end >= 0 {
			break
		}
	}
	if end < 0 {
		return nil, "", fmt.Errorf("%s: the list of %s is not closed by %q", d.at(m[0]), what, string(stop))
	}
	var names []string
	for _, sm := range backticked.FindAllStringSubmatch(d.text[start:end], -1) {
		names = append(names, sm[1])
	}
	if len(names) == 0 {
		return nil, "", fmt.Errorf("%s: no backticked names follow the label of %s", d.at(m[0]), what)
	}
	return names, d.at(m[0]), nil
}

// block returns the lines of the first fenced code block after anchor and
// the citation of its first line.
func (d doc) block(anchor *regexp.Regexp, what string) ([]string, string, error) {
	m, err := d.find(anchor, what)
	if err != nil {
		return nil, "", err
	}
	rest := d.text[m[1]:]
	open := strings.Index(rest, "```")
	if open < 0 {
		return nil, "", fmt.Errorf("%s: no code block follows the heading of %s", d.at(m[0]), what)
	}
	body := rest[open+3:]
	body = body[strings.IndexByte(body, '\n')+1:] // the fence's info string
	end := strings.Index(body, "```")
	if end < 0 {
		return nil, "", fmt.Errorf("%s: the code block of %s is not closed", d.at(m[0]), what)
	}
	var lines []string
	for _, l := range strings.Split(body[:end], "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return lines, d.at(m[1] + open), nil
}

// transitionTable reads a block of "from[, from...]: to, to" lines ("(none)"
// for an empty set). alias expands a left-hand name that stands for several
// statuses (the attempt table's "terminal"). It returns the statuses in
// order of first appearance on the left and the allowed set of each.
func transitionTable(lines []string, alias map[string][]string, at string) ([]string, map[string][]string, error) {
	var order []string
	next := map[string][]string{}
	for _, l := range lines {
		left, right, ok := strings.Cut(l, ":")
		if !ok {
			return nil, nil, fmt.Errorf("%s: table line %q has no \"from: to\" form", at, l)
		}
		var tos []string
		if r := strings.TrimSpace(right); r != "(none)" {
			tos = splitNames(r)
		}
		for _, from := range splitNames(left) {
			froms := []string{from}
			if a, ok := alias[from]; ok {
				froms = a
			}
			for _, f := range froms {
				if _, seen := next[f]; !seen {
					order = append(order, f)
				}
				next[f] = tos
			}
		}
	}
	return order, next, nil
}

func splitNames(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
