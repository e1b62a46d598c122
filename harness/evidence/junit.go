package evidence

import (
	"encoding/xml"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// The JUnit shapes below follow the common Ant/Surefire schema that CI
// systems (GitHub Actions reporters, GitLab, Jenkins) read.
type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Time     string       `xml:"time,attr,omitempty"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name       string          `xml:"name,attr"`
	Tests      int             `xml:"tests,attr"`
	Failures   int             `xml:"failures,attr"`
	Time       string          `xml:"time,attr,omitempty"`
	Properties []junitProperty `xml:"properties>property,omitempty"`
	Cases      []junitCase     `xml:"testcase"`
	// ms totals the cases' durations; unexported, so never encoded.
	ms int64
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr,omitempty"`
	Failure   *junitFailure `xml:"failure,omitempty"`
}

type junitFailure struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Body    string `xml:",cdata"`
}

// WriteJUnit writes JUnit XML: a testsuite "campaigns" and a testsuite
// "scenarios", one testcase each, and a failure on every failing one whose
// message is the first failure's detail and whose body holds every matching
// failure with its replay command. Failures naming neither a campaign nor a
// scenario go into a third suite, "other", so CI never loses one. With
// NoTimings no time attribute is written.
func WriteJUnit(w io.Writer, c Card, o WriteOptions) error {
	c, err := prepare(c, o)
	if err != nil {
		return err
	}
	bySource := map[string][]Failure{}
	for _, f := range c.Failures {
		bySource[f.Source] = append(bySource[f.Source], f)
	}
	props := junitProps(c.Run)
	campaigns := junitSuite{Name: "campaigns", Properties: props}
	for _, cp := range c.Campaigns {
		fails := bySource[cp.Name]
		delete(bySource, cp.Name)
		summary := fmt.Sprintf("%d divergences, %d violations, %d errors", cp.Divergences, cp.Violations, cp.Errors)
		campaigns.add(junitCase{Name: cp.Name, Classname: "campaigns", Time: seconds(c, cp.DurationMs)},
			cp.DurationMs, cp.Passed, fails, "campaign failed: "+summary)
	}
	scenarios := junitSuite{Name: "scenarios", Properties: props}
	for _, s := range c.Scenarios {
		fails := bySource[s.Key()]
		delete(bySource, s.Key())
		scenarios.add(junitCase{Name: s.Key(), Classname: "scenarios", Time: seconds(c, s.DurationMs)},
			s.DurationMs, s.Passed, fails, fmt.Sprintf("expected %s, observed %s", oneLine(s.Expected), oneLine(s.Observed)))
	}
	suites := []junitSuite{campaigns, scenarios}
	// Walk c.Failures rather than the map so leftovers keep card order.
	other := junitSuite{Name: "other", Properties: props}
	for _, f := range c.Failures {
		if fails, ok := bySource[f.Source]; ok {
			delete(bySource, f.Source)
			other.add(junitCase{Name: f.Source, Classname: "other", Time: seconds(c, 0)}, 0, false, fails, "failed")
		}
	}
	if len(other.Cases) > 0 {
		suites = append(suites, other)
	}
	root := junitSuites{Name: oneLine(c.Title) + " " + c.Date, Time: seconds(c, c.Run.DurationMs), Suites: suites}
	for i := range root.Suites {
		root.Suites[i].Time = seconds(c, root.Suites[i].ms)
		root.Tests += root.Suites[i].Tests
		root.Failures += root.Suites[i].Failures
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return fmt.Errorf("write junit: %w", err)
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(root); err != nil {
		return fmt.Errorf("write junit: %w", err)
	}
	if _, err := io.WriteString(w, "\n"); err != nil {
		return fmt.Errorf("write junit: %w", err)
	}
	return nil
}

// add appends one testcase, turning it into a failure when it did not pass.
// fallback is the message when the caller recorded no Failure for it.
func (s *junitSuite) add(tc junitCase, ms int64, passed bool, fails []Failure, fallback string) {
	s.Tests++
	if !passed || len(fails) > 0 {
		s.Failures++
		tc.Failure = junitFailureFor(fails, fallback)
	}
	s.Cases = append(s.Cases, tc)
	s.ms += ms
}

func junitFailureFor(fails []Failure, fallback string) *junitFailure {
	if len(fails) == 0 {
		return &junitFailure{Message: fallback, Type: "failure", Body: fallback}
	}
	var body strings.Builder
	for i, f := range fails {
		if i > 0 {
			body.WriteString("\n\n")
		}
		fmt.Fprintf(&body, "%s\n%s\nreplay: %s", failureTitle(f), strings.TrimSpace(f.Detail), strings.TrimSpace(f.Replay))
	}
	msg := oneLine(fails[0].Detail) + " (replay: " + oneLine(fails[0].Replay) + ")"
	return &junitFailure{Message: msg, Type: "failure", Body: body.String()}
}

func junitProps(r RunInfo) []junitProperty {
	props := []junitProperty{
		{"commit", r.Commit},
		{"go_version", r.GoVersion},
		{"postgres_version", r.PostgresVersion},
		{"postgres_kind", r.PostgresKind},
		{"host", r.Host},
		{"command", r.Command},
		{"first_seed", strconv.FormatUint(r.FirstSeed, 10)},
	}
	if r.Shard != "" {
		props = append(props, junitProperty{"shard", r.Shard})
	}
	return props
}

// seconds is JUnit's time attribute, or "" (omitted) with NoTimings.
func seconds(c Card, ms int64) string {
	if c.NoTimings {
		return ""
	}
	return strconv.FormatFloat(float64(ms)/1000, 'f', 3, 64)
}
