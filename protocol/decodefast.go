package protocol

import (
	"encoding/json"
	"reflect"
	"slices"
)

// decodeFast accepts a frame in one pass over its members and one struct
// decode, where decodeStrict parses it four or five times over (as a map,
// its required and nested fields again, then into the struct): at bench's
// peak decodeStrict was 9% of the control plane's and its load
// generator's CPU. It answers only for the frames decodeStrict accepts,
// and with the same message: ok is false for anything else, and for any
// frame it cannot vouch for, which decodeStrict then decides.
//
// It vouches for a frame when: the frame is one JSON object whose first
// member is "type" with a string naming a known message (as Encode writes
// every message); every member name, at the top and inside each
// struct-typed field's object, is byte for byte a field's JSON name, with
// no escape and no name twice; every required path is present and not
// null; and then encoding/json decodes the whole frame into the message
// (which also refuses malformed JSON and trailing data) and the message
// validates. Each of those is a step decodeStrict takes or implies, so it
// would accept the frame too, and its struct decoder would fill in the
// same message (TestDecodeFastAgreesWithStrict, FuzzDecodeFastAgreesWithStrict).
func decodeFast(data []byte, specs map[string]frameSpec) (any, bool) {
	sc := scanner{data: data}
	if !sc.byte('{') || string(sc.name()) != "type" || !sc.byte(':') {
		return nil, false
	}
	typ, ok := sc.plainString()
	if !ok {
		return nil, false
	}
	spec, ok := specs[string(typ)]
	if !ok || len(spec.required) > maxRequired {
		return nil, false
	}
	msg := spec.new()
	tab := fieldTables[reflect.TypeOf(msg)]
	var present [maxRequired]bool
	if !tab.members(&sc, present[:], 1<<tab["type"].index) {
		return nil, false
	}
	for i := range spec.required {
		if !present[i] {
			return nil, false
		}
	}
	if json.Unmarshal(data, msg) != nil || msg.validate() != nil {
		return nil, false
	}
	return msg, true
}

// maxRequired bounds a message's required paths (LeaseOffer has 14).
const maxRequired = 32

// fieldTable is a message struct's fields by JSON name, as checkKeys and
// fieldByJSONName see them.
type fieldTable map[string]fieldInfo

type fieldInfo struct {
	// index is the field's bit in a seen-names mask.
	index int
	// required is the field's index in its frame's required paths, or -1.
	required int
	// nested is the fields of a struct-typed field that checkKeys checks
	// inside (not a json.Unmarshaler such as time.Time), else nil.
	nested fieldTable
}

func newFieldTable(t reflect.Type, prefix string, required []string) fieldTable {
	tab := fieldTable{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, ok := jsonName(f)
		if _, taken := tab[name]; taken || !ok {
			continue // fieldByJSONName finds the first field of a name
		}
		info := fieldInfo{index: len(tab), required: slices.Index(required, prefix+name)}
		if checkedInside(f.Type) {
			info.nested = newFieldTable(f.Type, prefix+name+".", required)
		}
		tab[name] = info
	}
	if len(tab) > 64 {
		panic("protocol: a message has more fields than a seen-names mask holds")
	}
	return tab
}

// fieldTables holds each message's fields, by its pointer type.
var fieldTables = map[reflect.Type]fieldTable{}

func init() {
	for _, specs := range []map[string]frameSpec{agentFrames, gatewayFrames} {
		for _, spec := range specs {
			t := reflect.TypeOf(spec.new())
			fieldTables[t] = newFieldTable(t.Elem(), "", spec.required)
		}
	}
}

// members reads an object's remaining members through its closing brace
// (after its opening brace, or after a member already read whose bit is in
// seen), marking the required paths present and not null. It is false for
// a name that is not a field's or is there twice, and wherever the object
// is not one it can follow; it need not catch all malformed JSON, which the
// struct decoder refuses after it.
func (tab fieldTable) members(sc *scanner, present []bool, seen uint64) bool {
	first := seen == 0
	for {
		if sc.byte('}') {
			return true
		}
		if !first && !sc.byte(',') {
			return false
		}
		first = false
		info, ok := tab[string(sc.name())]
		if !ok || seen&(1<<info.index) != 0 || !sc.byte(':') {
			return false
		}
		seen |= 1 << info.index
		sc.space()
		null := sc.at("null")
		if !null && info.required >= 0 {
			present[info.required] = true
		}
		if info.nested != nil && sc.byte('{') {
			if !info.nested.members(sc, present, 0) {
				return false
			}
			continue
		}
		if !sc.skipValue() {
			return false
		}
	}
}

// scanner walks a frame's structure. It is written by hand because the
// contract package imports the standard library only, and encoding/json's
// own tokenizer (Decoder.Token) allocates for every token, which is the
// cost this path exists to avoid.
type scanner struct {
	data []byte
	i    int
}

func (s *scanner) space() {
	for s.i < len(s.data) {
		switch s.data[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// byte consumes c, after any whitespace, if it is next.
func (s *scanner) byte(c byte) bool {
	s.space()
	if s.i < len(s.data) && s.data[s.i] == c {
		s.i++
		return true
	}
	return false
}

func (s *scanner) at(lit string) bool {
	return len(s.data)-s.i >= len(lit) && string(s.data[s.i:s.i+len(lit)]) == lit
}

// plainString consumes a string with no escape and returns its bytes.
func (s *scanner) plainString() ([]byte, bool) {
	if !s.byte('"') {
		return nil, false
	}
	start := s.i
	for s.i < len(s.data) {
		switch c := s.data[s.i]; {
		case c == '"':
			s.i++
			return s.data[start : s.i-1], true
		case c == '\\' || c < 0x20:
			return nil, false
		}
		s.i++
	}
	return nil, false
}

// name is a member name with no escape (empty when there is none, which no
// field's is).
func (s *scanner) name() []byte {
	n, _ := s.plainString()
	return n
}

// skipValue consumes one value: a string, or anything up to the comma or
// brace that ends it at its depth, strings inside it skipped whole.
func (s *scanner) skipValue() bool {
	s.space()
	depth := 0
	for s.i < len(s.data) {
		switch s.data[s.i] {
		case '"':
			if !s.skipString() {
				return false
			}
			if depth == 0 {
				return true
			}
			continue
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return true // the enclosing object's brace: a scalar ended
			}
			depth--
		case ',':
			if depth == 0 {
				return true
			}
		}
		s.i++
	}
	return false
}

func (s *scanner) skipString() bool {
	s.i++ // the opening quote
	for s.i < len(s.data) {
		switch s.data[s.i] {
		case '\\':
			s.i += 2
			continue
		case '"':
			s.i++
			return true
		}
		s.i++
	}
	return false
}
