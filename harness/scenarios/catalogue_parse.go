package scenarios

import (
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/rendermac/rendermac/server/clientaddr"
	"github.com/rendermac/rendermac/server/faultpoint"
)

// A scenario script is a header of `key: value` lines followed by steps,
// one per line; `#` starts a comment line. Header keys:
//
//	name:      the scenario's name (required, unique)
//	fault:     what is injected (required)
//	phase:     the lifecycle phase it strikes (required)
//	expect:    the asserted outcome in words (required)
//	broken-by: comma-separated variants the scenario must fail against
//	proposed:  the server variant that would break it, when no variant does
//	rules:     comma-separated ids of the contract's rules the scenario
//	           checks (docs/SPEC.md and docs/semantics.md, `[R:area.name]`)
//	postgres:  shared (default), dedicated (own cluster, may be stopped) or
//	           proxy (the service's pool goes through the harness's TCP proxy)
//	pings:     on (default) or off: the gateways send no WebSocket pings, so
//	           no pong heartbeats a device and only its frames do (their
//	           touch window stays the 10s ping interval pings would have)
//	catalogue: the service catalogue the stacks run on, a file NAME of
//	           testdata/catalogues (default: the built-in services)
//	ffprobe:   verification runs ffprobe with this timeout (a duration);
//	           the scenario needs ffprobe installed (scenario_verify.go)
//	proxies:   comma-separated CIDRs the stacks' APIs trust as reverse
//	           proxies (--trusted-proxies; default none)
//	limits:    the stacks' abuse limits, judged at a limiter clock of the
//	           run's own that only `limiter advance` moves: `defaults`, or
//	           comma-separated NAME=RULE (pair, auth, jobs, connects-ip,
//	           connects-device: N/DURATION or off; keys=N bounds the keys
//	           each remembers), the others taking their defaults. Without
//	           it the stacks run the defaults at the wall clock
//	lease-ttl: the lease TTL of the stacks and their welcome (default 30s),
//	           short where a shipped agent's pings must be capped by it
//
// A step is a command and its words; `key=value` words are options, words
// after `->` are the expected outcome of the command itself, and "quoted
// words" may hold spaces. The commands and their examples are listed with
// their handlers (scenario_agent.go, scenario_realagent.go and
// scenario_agentrules.go, scenario_control.go,
// scenario_check.go, the HTTP surface's in scenario_http.go and
// scenario_webhook.go, and the core rules' own in scenario_core.go).
// Every script must hold at least one `reached` step: the mark proving the
// run hit the branch the scenario exists for. Any step may take
// `store=fs` or `store=s3`: it then runs only on that artifact store (the
// filesystem default, or S3 with EnvOptions.ArtifactsS3), for the few
// outcomes the two stores answer differently.

// scStep is one parsed step.
type scStep struct {
	line  int
	text  string
	cmd   string
	words []string // every word after the command, as written
	args  []string
	kv    map[string]string
	arrow []string
}

func (st scStep) String() string { return fmt.Sprintf("line %d `%s`", st.line, st.text) }

// opt returns option key's value, or def.
func (st scStep) opt(key, def string) string {
	if v, ok := st.kv[key]; ok {
		return v
	}
	return def
}

var headerKeys = []string{"name", "fault", "phase", "expect", "broken-by", "proposed", "rules", "postgres", "pings", "proxies", "lease-ttl", "catalogue", "ffprobe", "limits"}

func parseScenario(file, text string) (Scenario, error) {
	s := Scenario{File: file, pg: "shared"}
	inHeader := true
	marks := 0
	for i, raw := range strings.Split(text, "\n") {
		line := strings.TrimSpace(raw)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if inHeader {
			if key, val, ok := strings.Cut(line, ":"); ok && slices.Contains(headerKeys, key) {
				if err := s.setHeader(key, strings.TrimSpace(val)); err != nil {
					return s, fmt.Errorf("%s:%d: %w", file, i+1, err)
				}
				continue
			}
			inHeader = false
		}
		st, err := parseStep(i+1, line)
		if err != nil {
			return s, fmt.Errorf("%s:%d: %w", file, i+1, err)
		}
		if _, ok := scCommands[st.cmd]; !ok {
			return s, fmt.Errorf("%s:%d: unknown command %q", file, i+1, st.cmd)
		}
		if st.cmd == "reached" {
			marks++
		}
		if usesFaultpoint(st) && !slices.Contains(s.Needs, NeedFaultpoints) {
			s.Needs = append(s.Needs, NeedFaultpoints)
		}
		s.steps = append(s.steps, st)
	}
	switch {
	case s.Name == "" || s.Fault == "" || s.Phase == "" || s.Expected == "":
		return s, fmt.Errorf("%s: name, fault, phase and expect are required", file)
	case marks == 0:
		return s, fmt.Errorf("%s: no `reached` step: the scenario cannot show it hit its branch", file)
	case len(s.BrokenBy) == 0 && s.Proposed == "":
		return s, fmt.Errorf("%s: neither broken-by nor proposed: nothing shows the scenario can fail", file)
	}
	for _, v := range s.BrokenBy {
		if !KnownVariant(v) && (variantsBuilt || harnessOnly(v)) {
			return s, fmt.Errorf("%s: broken-by names unknown variant %q (known: %s)", file, v, strings.Join(VariantNames(), ", "))
		}
	}
	base := strings.TrimSuffix(path.Base(file), ".txt")
	if _, name, _ := strings.Cut(base, "_"); name != s.Name {
		return s, fmt.Errorf("%s: file name must be NN_%s.txt", file, s.Name)
	}
	return s, nil
}

func (s *Scenario) setHeader(key, val string) error {
	switch key {
	case "name":
		s.Name = val
	case "fault":
		s.Fault = val
	case "phase":
		s.Phase = val
	case "expect":
		s.Expected = val
	case "proposed":
		s.Proposed = val
	case "broken-by":
		for _, v := range strings.Split(val, ",") {
			if v = strings.TrimSpace(v); v != "" {
				s.BrokenBy = append(s.BrokenBy, v)
			}
		}
	case "rules":
		for _, v := range strings.Split(val, ",") {
			if v = strings.TrimSpace(v); v != "" {
				s.Rules = append(s.Rules, v)
			}
		}
	case "postgres":
		switch val {
		case "shared":
		case "dedicated":
			s.Needs = append(s.Needs, NeedDedicatedPostgres)
		case "proxy":
			s.Needs = append(s.Needs, NeedProxy)
		default:
			return fmt.Errorf("postgres: want shared, dedicated or proxy, got %q", val)
		}
		s.pg = val
	case "proxies":
		if _, err := clientaddr.Parse(val); err != nil {
			return err
		}
		s.proxies = val
	case "limits":
		l, err := parseLimits(val)
		if err != nil {
			return err
		}
		s.limits = &l
	case "lease-ttl":
		d, err := time.ParseDuration(val)
		if err != nil || d < 300*time.Millisecond {
			return fmt.Errorf("lease-ttl: want a duration of 300ms or more, got %q", val)
		}
		s.leaseTTL = d
	case "pings":
		if val != "on" && val != "off" {
			return fmt.Errorf("pings: want on or off, got %q", val)
		}
		s.noPings = val == "off"
	case "catalogue": // parsed at setup, where a refusal fails the scenario
		if _, err := catalogueFile(val); err != nil {
			return fmt.Errorf("catalogue: %w", err)
		}
		s.catalogue = val
	case "ffprobe":
		d, err := time.ParseDuration(val)
		if err != nil || d <= 0 {
			return fmt.Errorf("ffprobe: want a timeout such as 20s, got %q", val)
		}
		s.ffprobeTimeout = d
		s.Needs = append(s.Needs, NeedFFprobe)
	}
	return nil
}

func parseStep(line int, text string) (scStep, error) {
	words, err := splitWords(text)
	if err != nil {
		return scStep{}, err
	}
	st := scStep{line: line, text: text, cmd: words[0], words: words[1:], kv: map[string]string{}}
	arrow := false
	for _, w := range words[1:] {
		switch {
		case w == "->":
			arrow = true
		case arrow:
			st.arrow = append(st.arrow, w)
		case strings.Contains(w, "=") && !strings.HasPrefix(w, "="):
			k, v, _ := strings.Cut(w, "=")
			if k == "store" && v != storeFS && v != storeS3 {
				return scStep{}, fmt.Errorf("store=%s: want store=%s or store=%s", v, storeFS, storeS3)
			}
			st.kv[k] = v
		default:
			st.args = append(st.args, w)
		}
	}
	return st, nil
}

// splitWords splits on blanks, keeping "quoted words" whole.
func splitWords(text string) ([]string, error) {
	var out []string
	var cur strings.Builder
	quoted, have := false, false
	for _, c := range text {
		switch {
		case c == '"':
			quoted, have = !quoted, true
		case (c == ' ' || c == '\t') && !quoted:
			if have {
				out = append(out, cur.String())
				cur.Reset()
				have = false
			}
		default:
			cur.WriteRune(c)
			have = true
		}
	}
	if quoted {
		return nil, fmt.Errorf("unterminated quote in %q", text)
	}
	if have {
		out = append(out, cur.String())
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("empty step")
	}
	return out, nil
}

// usesFaultpoint reports whether a step arms, awaits, releases or marks a
// server fault point (as opposed to a harness hook).
func usesFaultpoint(st scStep) bool {
	switch st.cmd {
	case "arm", "await", "release":
		return len(st.args) > 0 && faultpoint.Known(st.args[0])
	case "reached":
		return len(st.args) > 1 && st.args[0] == "hit" && faultpoint.Known(st.args[1])
	}
	return false
}
