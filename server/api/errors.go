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

	"github.com/rendermac/rendermac/protocol/buyer"
)

// writeJSON writes v with status. Encoding our own response types cannot
// fail, and a write error means the client is gone, so neither is reported.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, code, message string) {
	writeJSON(w, status, buyer.Error{Code: code, Message: message})
}

// requestError is a refusal decided while reading a request, before any
// state is touched.
type requestError struct {
	status int
	body   buyer.Error
}

func (e *requestError) Error() string { return e.body.Code + ": " + e.body.Message }

func (e *requestError) write(w http.ResponseWriter) { writeJSON(w, e.status, e.body) }

func invalid(field, format string, args ...any) *requestError {
	return &requestError{status: http.StatusUnprocessableEntity,
		body: buyer.Error{Code: "validation_error", Message: fmt.Sprintf(format, args...), Field: field}}
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
		body: buyer.Error{Code: buyer.CodeBadRequest, Message: "request body is not valid UTF-8"}}
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
			body: buyer.Error{Code: buyer.CodeBodyTooLarge, Message: fmt.Sprintf("request body exceeds %d bytes", limit)}}
	}
	return nil, &requestError{status: http.StatusBadRequest,
		body: buyer.Error{Code: buyer.CodeBadRequest, Message: "request body could not be read: " + err.Error()}}
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
		body: buyer.Error{Code: buyer.CodeBadRequest, Message: "request body is not a JSON object: " + err.Error()}}
}
