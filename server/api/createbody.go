package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/rendermac/rendermac/protocol"
)

// A create body is read field by field, and a field the API cannot convert
// (a value of the wrong JSON type, base64 that does not decode, a param
// value that is not UTF-8) is not refused on the spot: that would answer it
// before a field the contract checks first (docs/semantics.md, CreateJob
// step 1). The API instead hands the service layer a value it refuses for
// the same field, so the service layer alone decides which invalid field is
// named, as it does for every caller, and the API only keeps its own, more
// precise message for that field.

// Values the service layer refuses for their field whatever else the request
// holds: they stand for a field the API could not convert.
const (
	unknownService      = ""                          // no catalogue entry has an empty name
	invalidMaxAttempts  = protocol.MaxAttemptsMin - 1 // below 1..10
	invalidWindow       = -1                          // below [1s, 7d]
	invalidInputBytes   = -1                          // input bytes < 0
	invalidParamKeyName = ""                          // not [a-z0-9_]{1,32}
)

// createJobBody is the body of POST /v1/jobs. An absent field (or JSON
// null) takes its default; an explicit zero is refused.
type createJobBody struct {
	Service          bodyValue[string] `json:"service"`
	Params           bodyParams        `json:"params"`
	InputBase64      bodyValue[string] `json:"input_base64"`
	InputID          bodyValue[string] `json:"input_id"`
	MaxAttempts      bodyValue[int]    `json:"max_attempts"`
	AdmissionWindowS bodyValue[int64]  `json:"admission_window_s"`
}

// bodyValue is one field of a create body. A value of the wrong JSON type
// is kept as err, for the service layer to rank among the request's other
// invalid fields.
type bodyValue[T any] struct {
	v   T
	set bool
	err error
}

// UnmarshalJSON never fails, so decoding goes on to the other fields.
func (f *bodyValue[T]) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	f.set = true
	f.err = json.Unmarshal(b, &f.v)
	return nil
}

// bodyParams is the params object. encoding/json would turn bytes that are
// not UTF-8 into U+FFFD, storing a value the client did not send, where the
// contract refuses it (params); so such a value is kept as bytes that are
// still not UTF-8, and the service layer refuses it in its place. A value
// is converted once the service is known (convert): a JSON number or
// boolean is accepted for a param the service declares of that type.
type bodyParams struct {
	raw map[string]json.RawMessage
	m   map[string]string
	err error
	// at names what err is about: params, or the offending params.KEY.
	at string
}

// UnmarshalJSON never fails, so decoding goes on to the other fields.
func (p *bodyParams) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	if err := json.Unmarshal(b, &p.raw); err != nil {
		p.err, p.at = err, "params"
	}
	return nil
}

// convert turns the raw values into the contract's text, reading each as
// the type svc declares for it (a string when it declares none).
func (p *bodyParams) convert(svc protocol.Service) {
	if p.raw == nil {
		return
	}
	p.m = make(map[string]string, len(p.raw))
	for _, k := range slices.Sorted(maps.Keys(p.raw)) { // the same key named every time
		raw := p.raw[k]
		if spec, declared := svc.Param(k); declared && len(raw) > 0 && raw[0] != '"' {
			if text, ok := protocol.ParamText(spec.Type, raw); ok {
				p.m[k] = text
				continue
			}
			p.err, p.at = fmt.Errorf("must be %s, got %s", jsonKinds(spec.Type), clipRaw(raw)), "params."+k
			return
		}
		s, err := paramText(raw)
		if err != nil {
			p.err, p.at = err, "params."+k
			return
		}
		p.m[k] = s
	}
}

// jsonKinds are the JSON values a param of type typ may be sent as.
func jsonKinds(typ string) string {
	switch typ {
	case protocol.ParamInteger, protocol.ParamNumber:
		return "a JSON number or a string (" + typ + ")"
	case protocol.ParamBoolean:
		return "true, false or a string (boolean)"
	}
	return "a string"
}

func clipRaw(raw json.RawMessage) string {
	if len(raw) > 32 {
		return string(raw[:32]) + "..."
	}
	return string(raw)
}

// paramText decodes a JSON string. One holding bytes that are not UTF-8 is
// returned undecoded: it is refused whatever its escapes mean, and its
// inner bytes are not UTF-8 either (the quotes are ASCII).
func paramText(raw json.RawMessage) (string, error) {
	if utf8.Valid(raw) || raw[0] != '"' {
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err
	}
	return string(raw[1 : len(raw)-1]), nil
}

// typeMessage says why the API could not convert field, in JSON's words
// (never a Go type's name).
func typeMessage(field string, err error) string {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		return fmt.Sprintf("%s must be %s, got %s", field, jsonKind(typeErr.Type), typeErr.Value)
	}
	return fmt.Sprintf("%s: %v", field, err)
}

// jsonKind names the JSON value a Go type decodes from.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "true or false"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "an array"
	}
	return "another JSON value"
}

func isTypeError(err error) bool {
	var typeErr *json.UnmarshalTypeError
	return errors.As(err, &typeErr)
}

// paramsWhy words the service layer's params refusal: the first param (in
// name order) that breaks a rule, and what is allowed instead. ok is false
// when every param is allowed.
func paramsWhy(svc protocol.Service, params map[string]string) (string, bool) {
	if len(params) > protocol.ParamsMax {
		return fmt.Sprintf("params holds %d entries; at most %d are allowed", len(params), protocol.ParamsMax), true
	}
	for _, k := range slices.Sorted(maps.Keys(params)) {
		v := params[k]
		spec, declared := svc.Param(k)
		switch {
		case !protocol.ValidParamKey(k):
			return fmt.Sprintf("params key %q must match %s", clipText(k), protocol.ParamKeyPattern), true
		case len(v) > protocol.ParamValueMaxBytes:
			return fmt.Sprintf("params.%s is %d bytes; at most %d are allowed", k, len(v), protocol.ParamValueMaxBytes), true
		case !protocol.ValidText(v):
			return fmt.Sprintf("params.%s must be UTF-8 text without NUL bytes", k), true
		case !declared:
			return fmt.Sprintf("params.%s is not a param of %s; %s", k, svc.Name, declaredParams(svc)), true
		case !spec.Accepts(v):
			return fmt.Sprintf("params.%s must be %s, got %s", k, spec.Describe(), echoParam(spec, v)), true
		}
	}
	return "", false
}

// declaredParams lists what a service takes, for a refusal of another key.
func declaredParams(svc protocol.Service) string {
	if len(svc.Params) == 0 {
		return "it takes no params"
	}
	list := make([]string, len(svc.Params))
	for i, p := range svc.Params {
		list[i] = p.Name + " (" + p.Describe() + ")"
	}
	return "it takes " + strings.Join(list, ", ")
}

// echoParam quotes a refused value as the client would read it back: a
// number a declared integer or number param was sent as stays a number.
func echoParam(spec protocol.ParamSpec, v string) string {
	if (spec.Type == protocol.ParamInteger || spec.Type == protocol.ParamNumber) && json.Valid([]byte(v)) &&
		v != "" && (v[0] == '-' || v[0] >= '0' && v[0] <= '9') {
		return clipText(v)
	}
	return strconv.Quote(clipText(v))
}

// serviceWhy words a refusal of a service name the catalogue lacks.
func serviceWhy(catalogue []protocol.Service, name string) string {
	names := make([]string, len(catalogue))
	for i, s := range catalogue {
		names[i] = s.Name
	}
	return fmt.Sprintf("service %s is not in the catalogue; known services: %s", strconv.Quote(clipText(name)),
		strings.Join(names, ", "))
}

func clipText(s string) string {
	if len(s) > 32 {
		return s[:32] + "..."
	}
	return s
}
