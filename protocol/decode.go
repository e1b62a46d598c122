package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// DecodeError says what is wrong with a frame. Field names the offending
// JSON field ("" when the frame as a whole is malformed).
type DecodeError struct {
	Field  string
	Reason string
}

func (e *DecodeError) Error() string {
	if e.Field == "" {
		return "bad message: " + e.Reason
	}
	return fmt.Sprintf("bad message: field %q: %s", e.Field, e.Reason)
}

type frameSpec struct {
	required []string
	new      func() validator
}

type validator interface{ validate() error }

var agentFrames = map[string]frameSpec{
	TypeHello:    {[]string{"agent_version", "services", "slots_total", "slots_free"}, func() validator { return &Hello{} }},
	TypeSlots:    {[]string{"slots_free"}, func() validator { return &Slots{} }},
	TypeProgress: {[]string{"job_id", "attempt_id", "lease_epoch", "phase"}, func() validator { return &Progress{} }},
	TypeFail:     {[]string{"job_id", "attempt_id", "lease_epoch", "commit_token", "failure_code"}, func() validator { return &Fail{} }},
	TypeCommit:   {[]string{"job_id", "attempt_id", "lease_epoch", "commit_token", "output", "output.key", "output.bytes", "output.sha256"}, func() validator { return &Commit{} }},
}

var gatewayFrames = map[string]frameSpec{
	TypeWelcome:        {[]string{"device_id", "lease_ttl_ms", "heartbeat_ms"}, func() validator { return &Welcome{} }},
	TypeLeaseOffer:     {[]string{"job_id", "attempt_id", "attempt_number", "lease_epoch", "commit_token", "lease_expires_at", "service", "input", "output", "input.url", "input.bytes", "input.sha256", "output.key", "output.upload_url"}, func() validator { return &LeaseOffer{} }},
	TypeProgressOK:     {[]string{"job_id", "attempt_id", "lease_expires_at"}, func() validator { return &ProgressOK{} }},
	TypeLeaseConflict:  {[]string{"job_id", "attempt_id", "reason"}, func() validator { return &LeaseConflict{} }},
	TypeCancel:         {[]string{"job_id", "attempt_id"}, func() validator { return &Cancel{} }},
	TypeDrain:          {nil, func() validator { return &Drain{} }},
	TypeCommitOK:       {[]string{"job_id", "attempt_id"}, func() validator { return &CommitOK{} }},
	TypeCommitRejected: {[]string{"job_id", "attempt_id", "code"}, func() validator { return &CommitRejected{} }},
	TypeFailOK:         {[]string{"job_id", "attempt_id", "requeued"}, func() validator { return &FailOK{} }},
	TypeFailRejected:   {[]string{"job_id", "attempt_id", "code"}, func() validator { return &FailRejected{} }},
	TypeError:          {[]string{"code", "message"}, func() validator { return &ErrorMessage{} }},
}

// DecodeAgentFrame strictly decodes a frame an agent sent: malformed JSON, an
// unknown type, a missing, unknown or wrong-typed field, or a value out of
// range is a *DecodeError naming the field. It returns a pointer to one of
// Hello, Slots, Progress, Fail or Commit.
func DecodeAgentFrame(data []byte) (any, error) { return decodeFrame(data, agentFrames) }

// DecodeGatewayFrame strictly decodes a frame the gateway sent.
func DecodeGatewayFrame(data []byte) (any, error) { return decodeFrame(data, gatewayFrames) }

// decodeFrame is decodeFast's message when it can vouch for the frame,
// and decodeStrict's verdict otherwise, which decides every refusal and
// its DecodeError.
func decodeFrame(data []byte, specs map[string]frameSpec) (any, error) {
	if msg, ok := decodeFast(data, specs); ok {
		return msg, nil
	}
	return decodeStrict(data, specs)
}

// decodeStrict decodes in the steps that make each refusal's DecodeError:
// the frame as an object, its type, its required fields, its keys
// (checkKeys), then the struct decoder and the message's own validation.
func decodeStrict(data []byte, specs map[string]frameSpec) (any, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return nil, &DecodeError{Reason: "malformed JSON: " + err.Error()}
	}
	rawType, ok := fields["type"]
	if !ok || string(rawType) == "null" {
		return nil, &DecodeError{Field: "type", Reason: "missing"}
	}
	var typ string
	if err := json.Unmarshal(rawType, &typ); err != nil {
		return nil, &DecodeError{Field: "type", Reason: "must be a string"}
	}
	spec, ok := specs[typ]
	if !ok {
		return nil, &DecodeError{Field: "type", Reason: fmt.Sprintf("unknown type %q", typ)}
	}
	for _, f := range spec.required {
		if missing(fields, f) {
			return nil, &DecodeError{Field: f, Reason: "missing"}
		}
	}
	msg := spec.new()
	if err := checkKeys(fields, reflect.TypeOf(msg).Elem(), ""); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(msg); err != nil {
		return nil, jsonFieldError(err)
	}
	if err := msg.validate(); err != nil {
		return nil, err
	}
	return msg, nil
}

// missing reports whether the required field path ("output" or
// "output.key") is absent or null. A nested path whose parent is not an
// object is left to the struct decoder, which reports the parent's type.
func missing(fields map[string]json.RawMessage, path string) bool {
	name, rest, nested := strings.Cut(path, ".")
	v, ok := fields[name]
	if !ok || string(v) == "null" {
		return true
	}
	if !nested {
		return false
	}
	var inner map[string]json.RawMessage
	if json.Unmarshal(v, &inner) != nil {
		return false
	}
	return missing(inner, rest)
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// checkKeys rejects every key of obj that is not, byte for byte, the JSON
// name of a field of the struct type t, recursing into nested objects, and
// decodes values of types with their own UnmarshalJSON (time.Time) so that a
// bad one is reported with its field. encoding/json matches keys
// case-insensitively, so without this {"type":"hello","Type":"slots"} decodes
// into a *Hello whose Type is "slots", and "SLOTS_FREE" silently overrides
// "slots_free". Keys are checked in sorted order so the error is deterministic.
func checkKeys(obj map[string]json.RawMessage, t reflect.Type, prefix string) error {
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, key := range keys {
		f, ok := fieldByJSONName(t, key)
		if !ok {
			return &DecodeError{Field: prefix + key, Reason: "unknown field"}
		}
		val := obj[key]
		if string(val) == "null" {
			continue
		}
		if reflect.PointerTo(f.Type).Implements(unmarshalerType) {
			if err := json.Unmarshal(val, reflect.New(f.Type).Interface()); err != nil {
				return &DecodeError{Field: prefix + key, Reason: err.Error()}
			}
			continue
		}
		if !checkedInside(f.Type) {
			continue
		}
		var inner map[string]json.RawMessage
		if json.Unmarshal(val, &inner) != nil {
			continue // not an object: the struct decoder reports the type
		}
		if err := checkKeys(inner, f.Type, prefix+key+"."); err != nil {
			return err
		}
	}
	return nil
}

func fieldByJSONName(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if n, ok := jsonName(f); ok && n == name {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// jsonName is the name a struct field takes in a frame; ok is false for a
// field encoding/json leaves out (unexported, or tagged "-").
func jsonName(f reflect.StructField) (name string, ok bool) {
	name, _, _ = strings.Cut(f.Tag.Get("json"), ",")
	if name == "" {
		name = f.Name
	}
	return name, f.IsExported() && name != "-"
}

// checkedInside reports whether checkKeys checks the keys inside a field
// of type t: a struct that does not decode itself (as time.Time does).
func checkedInside(t reflect.Type) bool {
	return t.Kind() == reflect.Struct && !reflect.PointerTo(t).Implements(unmarshalerType)
}

func jsonFieldError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return &DecodeError{Field: te.Field, Reason: "must be " + jsonKind(te.Type.Kind().String()) + ", got " + te.Value}
	}
	// encoding/json reports unknown fields only as text: `json: unknown field "x"`.
	const unknown = "json: unknown field "
	if msg := err.Error(); len(msg) > len(unknown) && msg[:len(unknown)] == unknown {
		return &DecodeError{Field: trimQuotes(msg[len(unknown):]), Reason: "unknown field"}
	}
	return &DecodeError{Reason: err.Error()}
}

func jsonKind(k string) string {
	switch k {
	case "int", "int64", "float64":
		return "a number"
	case "string":
		return "a string"
	case "slice":
		return "an array"
	case "struct", "map":
		return "an object"
	case "bool":
		return "a boolean"
	}
	return k
}

func trimQuotes(s string) string {
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		return s[1 : len(s)-1]
	}
	return s
}

// Encode marshals a message; messages are plain structs, so this cannot fail
// short of a programming error, which panics.
func Encode(msg any) []byte {
	b, err := json.Marshal(msg)
	if err != nil {
		panic(fmt.Sprintf("protocol: encode %T: %v", msg, err))
	}
	return b
}
