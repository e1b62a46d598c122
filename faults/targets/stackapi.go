package targets

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"time"

	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/api"
)

// stackInput is the input every job created through the API carries: the
// bytes whose SHA-256 the generator's requests declare (normalization 4).
var stackInput = base64.StdEncoding.EncodeToString([]byte("test"))

// apiFields maps the API's names of request fields back to the service
// layer's validation fields (the inverse of the API's own mapping).
var apiFields = map[string]string{"admission_window_s": "admission_window", "Idempotency-Key": "idempotency_key"}

// CreateJob implements faults.Target with POST /v1/jobs as the buyer.
func (t *StackTarget) CreateJob(ctx context.Context, now time.Time, req protocol.CreateJobRequest) (protocol.Reply, error) {
	if err := t.begin(now); err != nil {
		return protocol.Reply{}, err
	}
	if req.AdmissionWindow%time.Second != 0 {
		return protocol.Reply{}, fmt.Errorf("create job: admission window %s is not whole seconds, which the API cannot express", req.AdmissionWindow)
	}
	body, err := json.Marshal(map[string]any{"service": req.Service, "input_base64": stackInput,
		"max_attempts": req.MaxAttempts, "admission_window_s": int64(req.AdmissionWindow / time.Second)})
	if err != nil {
		return protocol.Reply{}, err
	}
	body = append(append(body[:len(body)-1], `,"params":`...), rawJSONObject(req.Params)...)
	body = append(body, '}')
	status, out, err := t.call(ctx, req.BuyerID, "/v1/jobs", body, req.IdempotencyKey)
	if err != nil {
		return protocol.Reply{}, err
	}
	switch status {
	case http.StatusCreated, http.StatusOK:
		return protocol.Reply{Code: protocol.CodeCreated, JobID: out.ID, Existing: status == http.StatusOK}, nil
	case http.StatusUnprocessableEntity:
		field := out.Field
		if f, ok := apiFields[field]; ok {
			field = f
		}
		return protocol.Reply{Code: protocol.CodeValidation, Field: field, Message: out.Message}, nil
	case http.StatusPaymentRequired, http.StatusConflict:
		return protocol.Reply{Code: protocol.Code(out.Code), Message: out.Message}, nil
	}
	return protocol.Reply{}, fmt.Errorf("create job: HTTP %d %s: %s", status, out.Code, out.Message)
}

// Cancel implements faults.Target with POST /v1/jobs/{id}/cancel as the buyer.
func (t *StackTarget) Cancel(ctx context.Context, now time.Time, buyer, job string) (protocol.Reply, error) {
	if err := t.begin(now); err != nil {
		return protocol.Reply{}, err
	}
	status, out, err := t.call(ctx, buyer, "/v1/jobs/"+job+"/cancel", nil, "")
	if err != nil {
		return protocol.Reply{}, err
	}
	switch status {
	case http.StatusOK:
		return protocol.Reply{Code: protocol.CodeCancelled}, nil
	case http.StatusAccepted:
		return protocol.Reply{Code: protocol.CodeCancelling}, nil
	case http.StatusConflict, http.StatusNotFound:
		return protocol.Reply{Code: protocol.Code(out.Code), Message: out.Message}, nil
	}
	return protocol.Reply{}, fmt.Errorf("cancel job: HTTP %d %s: %s", status, out.Code, out.Message)
}

// apiAnswer is what the harness reads of an API response: a job's id, or
// an error body.
type apiAnswer struct {
	ID string `json:"id"`
	api.Error
}

// call POSTs body to path through the API handler as buyer.
func (t *StackTarget) call(ctx context.Context, buyer, path string, body []byte, idemKey string) (int, apiAnswer, error) {
	key, ok := t.apiKeys[buyer]
	if !ok {
		return 0, apiAnswer{}, fmt.Errorf("POST %s: buyer %s has no API key", path, buyer)
	}
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, path, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	if idemKey != "" {
		req.Header.Set("Idempotency-Key", idemKey)
	}
	rec := httptest.NewRecorder()
	t.api.ServeHTTP(rec, req)
	var out apiAnswer
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		return 0, out, fmt.Errorf("POST %s: HTTP %d with a body that is not JSON: %w", path, rec.Code, err)
	}
	return rec.Code, out, nil
}

// rawJSONObject renders params as a JSON object whose string bytes are the
// params' own, invalid UTF-8 included: encoding/json would replace such
// bytes with U+FFFD, so the API would never see what the generator drew
// (written by hand for that reason alone; keys are sorted, and quotes,
// backslashes and control bytes are escaped as JSON requires).
func rawJSONObject(params map[string]string) []byte {
	out := []byte{'{'}
	for i, k := range slices.Sorted(maps.Keys(params)) {
		if i > 0 {
			out = append(out, ',')
		}
		out = appendRawJSONString(out, k)
		out = append(out, ':')
		out = appendRawJSONString(out, params[k])
	}
	return append(out, '}')
}

func appendRawJSONString(out []byte, s string) []byte {
	out = append(out, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			out = append(out, '\\', c)
		case c < 0x20:
			out = fmt.Appendf(out, `\u%04x`, c)
		default:
			out = append(out, c)
		}
	}
	return append(out, '"')
}
