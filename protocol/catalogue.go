package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The service catalogue file (docs/SPEC.md, "Service catalogue") is JSON:
//
//	{"include_builtin": true,
//	 "services": [{"name": "transcode.hevc_720p", "price_cents": 60,
//	   "runner": {"kind": "transcode", "codec": "hevc", "width": 1280, "height": 720, "bitrate_kbps": 2500},
//	   "params": {"duration_s": {"type": "integer", "min": 1, "max": 600}},
//	   "verify": {"codec": "hevc", "width": 1280, "height": 720, "min_video_tracks": 1}}]}
//
// ParseCatalogue reads it; the operator gives the same file to the server
// and to the agents (--catalogue FILE).

// Catalogue limits.
const (
	catalogueMaxServices = 256
	serviceNameMaxLen    = 64
	paramStringMaxLen    = 256 // the contract's bound on a param value
	paramsMaxDeclared    = 32  // the contract's bound on a job's params
)

type catalogueFile struct {
	IncludeBuiltin bool              `json:"include_builtin"`
	Services       []json.RawMessage `json:"services"`
}

type serviceFile struct {
	Name       string               `json:"name"`
	PriceCents *int64               `json:"price_cents"`
	Media      string               `json:"media"`
	Runner     *RunnerSpec          `json:"runner"`
	Params     map[string]paramFile `json:"params"`
	Verify     VerifyProfile        `json:"verify"`
}

type paramFile struct {
	Type    string          `json:"type"`
	Min     *float64        `json:"min"`
	Max     *float64        `json:"max"`
	Enum    []string        `json:"enum"`
	MaxLen  int             `json:"max_len"`
	Default json.RawMessage `json:"default"`
}

// CatalogueError names the service and the field of a catalogue file that
// is wrong.
type CatalogueError struct {
	Index   int    // position in "services"; -1 for the file as a whole
	Service string // the entry's name, when it has one
	Field   string // e.g. runner.codec, params.crf.max
	Reason  string
}

func (e *CatalogueError) Error() string {
	switch {
	case e.Index < 0:
		return fmt.Sprintf("service catalogue: %s: %s", e.Field, e.Reason)
	case e.Service == "":
		return fmt.Sprintf("service catalogue: services[%d]: %s: %s", e.Index, e.Field, e.Reason)
	}
	return fmt.Sprintf("service catalogue: service %q (services[%d]): %s: %s", e.Service, e.Index, e.Field, e.Reason)
}

// ParseCatalogue reads a catalogue file. Unknown fields, duplicate names, a
// runner kind the agent does not know, bounds that do not hold and a
// default that its own spec refuses are errors naming the service and field.
// With include_builtin the default Services come first.
func ParseCatalogue(data []byte) ([]Service, error) {
	var f catalogueFile
	if err := strictJSON(data, &f); err != nil {
		return nil, &CatalogueError{Index: -1, Field: "file", Reason: err.Error()}
	}
	if len(f.Services) == 0 && !f.IncludeBuiltin {
		return nil, &CatalogueError{Index: -1, Field: "services", Reason: "no services (list some, or set include_builtin)"}
	}
	if len(f.Services) > catalogueMaxServices {
		return nil, &CatalogueError{Index: -1, Field: "services", Reason: fmt.Sprintf("%d services, at most %d", len(f.Services), catalogueMaxServices)}
	}
	var out []Service
	if f.IncludeBuiltin {
		out = append(out, Services...)
	}
	for i, raw := range f.Services {
		s, err := parseService(i, raw)
		if err != nil {
			return nil, err
		}
		if _, dup := FindService(out, s.Name); dup {
			return nil, &CatalogueError{Index: i, Service: s.Name, Field: "name", Reason: "named twice (a built-in name counts with include_builtin)"}
		}
		out = append(out, s)
	}
	return out, nil
}

func strictJSON(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}

func parseService(i int, raw json.RawMessage) (Service, error) {
	var peek struct {
		Name string `json:"name"`
	}
	_ = json.Unmarshal(raw, &peek) // only to name the entry in an error
	fail := func(field, format string, args ...any) (Service, error) {
		return Service{}, &CatalogueError{Index: i, Service: peek.Name, Field: field, Reason: fmt.Sprintf(format, args...)}
	}
	var sf serviceFile
	if err := strictJSON(raw, &sf); err != nil {
		return fail("entry", "%v", err)
	}
	switch {
	case !validServiceName(sf.Name):
		return fail("name", "want 1..%d bytes of [a-z0-9._-], got %q", serviceNameMaxLen, sf.Name)
	case sf.PriceCents == nil:
		return fail("price_cents", "missing")
	case *sf.PriceCents < 0:
		return fail("price_cents", "want >= 0, got %d", *sf.PriceCents)
	case sf.Runner == nil:
		return fail("runner", "missing (kinds: %s)", strings.Join(RunnerKinds, ", "))
	}
	if sf.Media == "" {
		sf.Media = "mp4"
	}
	if sf.Media != "mp4" {
		return fail("media", "want mp4, got %q", sf.Media)
	}
	s := Service{Name: sf.Name, PriceCents: *sf.PriceCents, Media: sf.Media, Runner: *sf.Runner, Verify: sf.Verify}
	if field, why := checkRunner(s.Runner); field != "" {
		return fail("runner."+field, "%s", why)
	}
	if len(sf.Params) > paramsMaxDeclared {
		return fail("params", "%d params, at most %d", len(sf.Params), paramsMaxDeclared)
	}
	for _, name := range slices.Sorted(maps.Keys(sf.Params)) {
		p, field, why := parseParam(name, sf.Params[name])
		if why != "" { // field is "" when the name itself is wrong
			return fail("params."+name+field, "%s", why)
		}
		s.Params = append(s.Params, p)
	}
	if field, why := checkProfile(s); field != "" {
		return fail("verify."+field, "%s", why)
	}
	return s, nil
}

func validServiceName(n string) bool {
	if n == "" || len(n) > serviceNameMaxLen {
		return false
	}
	for _, c := range []byte(n) {
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// checkRunner returns the field of r that is wrong for its kind and why.
func checkRunner(r RunnerSpec) (field, why string) {
	frame := func() (string, string) {
		switch {
		case r.Width < 16 || r.Width > 7680 || r.Width%2 != 0:
			return "width", fmt.Sprintf("want an even number 16..7680, got %d", r.Width)
		case r.Height < 16 || r.Height > 4320 || r.Height%2 != 0:
			return "height", fmt.Sprintf("want an even number 16..4320, got %d", r.Height)
		}
		return "", ""
	}
	unused := func(names ...string) (string, string) {
		set := map[string]bool{"width": r.Width != 0, "height": r.Height != 0, "codec": r.Codec != "",
			"bitrate_kbps": r.BitrateKbps != 0, "command": len(r.Command) > 0, "timeout_s": r.TimeoutS != 0}
		for _, n := range []string{"width", "height", "codec", "bitrate_kbps", "command", "timeout_s"} {
			if set[n] && !slices.Contains(names, n) {
				return n, fmt.Sprintf("not a setting of runner kind %q", r.Kind)
			}
		}
		return "", ""
	}
	switch r.Kind {
	case RunnerSynthetic:
		return unused()
	case RunnerFFmpeg:
		if f, w := frame(); f != "" {
			return f, w
		}
		return unused("width", "height")
	case RunnerTranscode:
		if f, w := frame(); f != "" {
			return f, w
		}
		if r.Codec != "h264" && r.Codec != "hevc" {
			return "codec", fmt.Sprintf("want h264 or hevc, got %q", r.Codec)
		}
		if r.BitrateKbps < 100 || r.BitrateKbps > 200_000 {
			return "bitrate_kbps", fmt.Sprintf("want 100..200000, got %d", r.BitrateKbps)
		}
		return unused("width", "height", "codec", "bitrate_kbps")
	case RunnerCommand:
		if len(r.Command) == 0 || r.Command[0] == "" {
			return "command", "want the renderer's argument vector, e.g. [\"npx\", \"remotion\", \"render\"]"
		}
		if r.TimeoutS < 1 || r.TimeoutS > 24*3600 {
			return "timeout_s", fmt.Sprintf("want 1..86400, got %d", r.TimeoutS)
		}
		return unused("command", "timeout_s")
	}
	return "kind", fmt.Sprintf("want one of %s, got %q", strings.Join(RunnerKinds, ", "), r.Kind)
}

func parseParam(name string, pf paramFile) (p ParamSpec, field, why string) {
	p = ParamSpec{Name: name, Type: pf.Type, Enum: pf.Enum, MaxLen: pf.MaxLen}
	if !validKey(name) {
		return p, "", "a param name must match [a-z0-9_]{1,32}"
	}
	switch pf.Type {
	case ParamInteger, ParamNumber:
		switch {
		case pf.Min == nil || pf.Max == nil:
			return p, ".min", "an integer or number param needs min and max"
		case *pf.Min > *pf.Max:
			return p, ".max", fmt.Sprintf("max %v is below min %v", *pf.Max, *pf.Min)
		case len(pf.Enum) > 0 || pf.MaxLen != 0:
			return p, ".enum", "enum and max_len are for string params"
		case pf.Type == ParamInteger && (*pf.Min != math.Trunc(*pf.Min) || *pf.Max != math.Trunc(*pf.Max)):
			return p, ".min", "integer bounds must be whole numbers"
		}
		p.Min, p.Max = *pf.Min, *pf.Max
	case ParamBoolean:
		if pf.Min != nil || pf.Max != nil || len(pf.Enum) > 0 || pf.MaxLen != 0 {
			return p, ".type", "a boolean param takes no bounds"
		}
	case ParamString:
		switch {
		case pf.Min != nil || pf.Max != nil:
			return p, ".min", "min and max are for integer and number params"
		case pf.MaxLen < 0 || pf.MaxLen > paramStringMaxLen:
			return p, ".max_len", fmt.Sprintf("want 0..%d, got %d", paramStringMaxLen, pf.MaxLen)
		}
		for _, e := range pf.Enum {
			if !p.Accepts(e) {
				return p, ".enum", fmt.Sprintf("value %q breaks the param's own max_len", e)
			}
		}
	default:
		return p, ".type", fmt.Sprintf("want integer, number, boolean or string, got %q", pf.Type)
	}
	if len(pf.Default) > 0 && string(pf.Default) != "null" {
		text, ok := ParamText(p.Type, pf.Default)
		if !ok || !p.Accepts(text) {
			return p, ".default", fmt.Sprintf("%s is not a valid %s for this param", pf.Default, p.Type)
		}
		p.Default = text
	}
	return p, "", ""
}

// checkProfile checks the verify profile against the service it belongs to.
func checkProfile(s Service) (field, why string) {
	v := s.Verify
	switch {
	case v.Width < 0 || v.Height < 0 || v.MinVideoTracks < 0 || v.DurationToleranceS < 0:
		return "width", "sizes, counts and tolerances must not be negative"
	case v.Codec != "" && !validCodecName(v.Codec):
		return "codec", fmt.Sprintf("want an ffprobe codec_name such as h264 or hevc, got %q", v.Codec)
	case s.Runner.Kind == RunnerTranscode && v.Codec != "" && v.Codec != s.Runner.Codec:
		return "codec", fmt.Sprintf("want the runner's codec %s, got %s", s.Runner.Codec, v.Codec)
	}
	if v.DurationParam != "" {
		p, ok := s.Param(v.DurationParam)
		if !ok || (p.Type != ParamInteger && p.Type != ParamNumber) {
			return "duration_param", fmt.Sprintf("%q is not a declared integer or number param", v.DurationParam)
		}
	}
	return "", ""
}

func validCodecName(c string) bool {
	if len(c) > 32 {
		return false
	}
	for _, b := range []byte(c) {
		if !('a' <= b && b <= 'z' || '0' <= b && b <= '9' || b == '_') {
			return false
		}
	}
	return true
}

// validKey matches [a-z0-9_]{1,32}, the contract's param key rule.
func validKey(k string) bool {
	return len(k) >= 1 && len(k) <= 32 && validCodecName(k)
}

// ParamText converts a JSON value to the canonical text of a param of type
// typ: a JSON string as its text (for any type), a JSON number as its
// literal (integer, number), a JSON boolean as true or false (boolean). ok
// is false for any other JSON value. The text is not yet checked against a
// spec: Accepts does that.
func ParamText(typ string, raw json.RawMessage) (text string, ok bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "", false
	}
	switch c := raw[0]; {
	case c == '"':
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return "", false
		}
		return s, true
	case (c == '-' || '0' <= c && c <= '9') && (typ == ParamInteger || typ == ParamNumber):
		return string(raw), json.Valid(raw)
	case (string(raw) == "true" || string(raw) == "false") && typ == ParamBoolean:
		return string(raw), true
	}
	return "", false
}

// Accepts reports whether v, a param value as text, fits the spec.
func (p ParamSpec) Accepts(v string) bool {
	switch p.Type {
	case ParamInteger:
		n, err := strconv.ParseInt(v, 10, 64)
		return err == nil && jsonNumberText(v) && float64(n) >= p.Min && float64(n) <= p.Max
	case ParamNumber:
		f, err := strconv.ParseFloat(v, 64)
		return err == nil && jsonNumberText(v) && !math.IsInf(f, 0) && !math.IsNaN(f) && f >= p.Min && f <= p.Max
	case ParamBoolean:
		return v == "true" || v == "false"
	case ParamString:
		max := p.MaxLen
		if max == 0 {
			max = paramStringMaxLen
		}
		return len(v) <= max && utf8.ValidString(v) && (len(p.Enum) == 0 || slices.Contains(p.Enum, v))
	}
	return false
}

// jsonNumberText reports whether v is a JSON number literal, the canonical
// form of integer and number params ("+1", " 1", "0x10", "1_0" are not).
func jsonNumberText(v string) bool {
	if v == "" || (v[0] != '-' && (v[0] < '0' || v[0] > '9')) || v[len(v)-1] < '0' || v[len(v)-1] > '9' {
		return false
	}
	return json.Valid([]byte(v))
}

// Describe words the spec for an error message: "an integer 1..60".
func (p ParamSpec) Describe() string {
	switch p.Type {
	case ParamInteger:
		return "an integer " + num(p.Min) + ".." + num(p.Max)
	case ParamNumber:
		return "a number " + num(p.Min) + ".." + num(p.Max)
	case ParamBoolean:
		return "true or false"
	case ParamString:
		if len(p.Enum) > 0 {
			return "one of " + strings.Join(p.Enum, ", ")
		}
		max := p.MaxLen
		if max == 0 {
			max = paramStringMaxLen
		}
		return fmt.Sprintf("text of at most %d bytes", max)
	}
	return p.Type
}

func num(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
