package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"
)

// Error codes the API answers with besides the contract's reply codes
// (validation_error, insufficient_funds, idempotency_conflict, not_found,
// job_terminal), which it passes through unchanged.
const (
	CodeUnauthorized       = "unauthorized"
	CodeBadRequest         = "bad_request"
	CodeBodyTooLarge       = "body_too_large"
	CodeInvalidKey         = "invalid_key"
	CodeGrantRequired      = "grant_required"
	CodeGrantExpired       = "grant_expired"
	CodeGrantInvalid       = "grant_invalid"
	CodeInvalidPairingCode = "invalid_pairing_code"
	CodeMethodNotAllowed   = "method_not_allowed"
	CodeNotReady           = "not_ready"
	CodeInternal           = "internal"
	// CodeOutputSealed refuses an upload to an attempt's output key once
	// the attempt has left its lease phases (committing or ended): the
	// output is write-once from its claim on (invariant 8).
	CodeOutputSealed = "output_sealed"
	// CodeInputSealed refuses a second PUT of an uploaded input: its key is
	// create-only, so the bytes jobs were checked against never change.
	CodeInputSealed = "input_sealed"
)

// Error is the JSON body of every error response.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// Field names the offending request field of a validation_error.
	Field string `json:"field,omitempty"`
}

// writeJSON writes v with status. Encoding our own response types cannot
// fail, and a write error means the client is gone, so neither is reported.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, code, message string) {
	writeJSON(w, status, Error{Code: code, Message: message})
}

// requestError is a refusal decided while reading a request, before any
// state is touched.
type requestError struct {
	status int
	body   Error
}

func (e *requestError) Error() string { return e.body.Code + ": " + e.body.Message }

func (e *requestError) write(w http.ResponseWriter) { writeJSON(w, e.status, e.body) }

func invalid(field, format string, args ...any) *requestError {
	return &requestError{status: http.StatusUnprocessableEntity,
		body: Error{Code: "validation_error", Message: fmt.Sprintf(format, args...), Field: field}}
}

// notUTF8 refuses a body that is not UTF-8 (RFC 8259 requires it), naming
// the first top-level field, in key order, whose raw value holds the bad
// bytes: encoding/json would otherwise turn them into U+FFFD and store
// something the client did not send.
func notUTF8(body []byte) *requestError {
	var raw map[string]json.RawMessage
	if json.Unmarshal(body, &raw) == nil {
		for _, k := range slices.Sorted(maps.Keys(raw)) {
			if !utf8.Valid(raw[k]) {
				return invalid(k, "%s is not valid UTF-8", k)
			}
		}
	}
	return &requestError{status: http.StatusBadRequest,
		body: Error{Code: CodeBadRequest, Message: "request body is not valid UTF-8"}}
}

// decodeJSON reads one JSON object of at most limit bytes into dst,
// refusing unknown fields and trailing data. A malformed body is 400, a
// well-formed one with a wrong or unknown field is 422 naming that field,
// an oversized one 413.
func decodeJSON(w http.ResponseWriter, r *http.Request, limit int64, dst any) *requestError {
	body, rerr := readBody(w, r, limit)
	if rerr != nil {
		return rerr
	}
	if !utf8.Valid(body) {
		return notUTF8(body)
	}
	return parseJSON(body, dst)
}

// readBody reads a body of at most limit bytes (413 beyond).
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, *requestError) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var tooLarge *http.MaxBytesError
	switch {
	case err == nil:
		return body, nil
	case errors.As(err, &tooLarge):
		return nil, &requestError{status: http.StatusRequestEntityTooLarge,
			body: Error{Code: CodeBodyTooLarge, Message: fmt.Sprintf("request body exceeds %d bytes", limit)}}
	}
	return nil, &requestError{status: http.StatusBadRequest,
		body: Error{Code: CodeBadRequest, Message: "request body could not be read: " + err.Error()}}
}

// parseJSON decodes one JSON object into dst, refusing unknown fields and
// trailing data: 400 when malformed, 422 naming a wrong or unknown field.
func parseJSON(body []byte, dst any) *requestError {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	err := dec.Decode(dst)
	if err == nil {
		if _, extra := dec.Token(); !errors.Is(extra, io.EOF) {
			err = errors.Join(errors.New("trailing data after the JSON object"), extra)
		}
	}
	var typeErr *json.UnmarshalTypeError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &typeErr):
		return invalid(typeErr.Field, "%s must be %s, got %s", typeErr.Field, typeErr.Type, typeErr.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		field := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return invalid(field, "unknown field %q", field)
	}
	return &requestError{status: http.StatusBadRequest,
		body: Error{Code: CodeBadRequest, Message: "request body is not a JSON object: " + err.Error()}}
}
