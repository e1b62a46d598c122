package targets

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"time"

	"github.com/rendermac/rendermac/harness/fuzz"
	"github.com/rendermac/rendermac/harness/loadgen"
	"github.com/rendermac/rendermac/protocol"
)

// stackInput is the input every job created through the API carries: the
// bytes whose SHA-256 the generator's requests declare (normalization 4).
var stackInput = []byte("test")

// apiFields maps the API's names of request fields back to the service
// layer's validation fields (the inverse of the API's own mapping).
var apiFields = map[string]string{"admission_window_s": "admission_window", "Idempotency-Key": "idempotency_key"}

// CreateJob implements fuzz.Target with POST /v1/jobs as the buyer.
func (t *StackTarget) CreateJob(ctx context.Context, now time.Time, req protocol.CreateJobRequest) (protocol.Reply, error) {
	if err := t.begin(now); err != nil {
		return protocol.Reply{}, err
	}
	if req.AdmissionWindow%time.Second != 0 {
		return protocol.Reply{}, fmt.Errorf("create job: admission window %s is not whole seconds, which the API cannot express", req.AdmissionWindow)
	}
	b, err := t.buyer(req.BuyerID, "/v1/jobs")
	if err != nil {
		return protocol.Reply{}, err
	}
	params := req.Params
	if params == nil {
		params = map[string]string{} // the request has no params: an empty object, not null
	}
	// Every field is sent, zeros included: the generator draws values the
	// service layer must refuse, which the API's defaults would hide.
	status, job, err := b.CreateJob(ctx, loadgen.JobRequest{Service: req.Service, Params: params, Input: stackInput,
		MaxAttempts: new(req.MaxAttempts), AdmissionWindowS: new(int64(req.AdmissionWindow / time.Second)),
		IdempotencyKey: req.IdempotencyKey})
	if err == nil {
		return protocol.Reply{Code: protocol.CodeCreated, JobID: job.ID, Existing: status == http.StatusOK}, nil
	}
	se, err := refusal(err)
	if err != nil {
		return protocol.Reply{}, err
	}
	switch se.Status {
	case http.StatusUnprocessableEntity:
		field := se.API.Field
		if f, ok := apiFields[field]; ok {
			field = f
		}
		return protocol.Reply{Code: protocol.CodeValidation, Field: field, Message: se.API.Message}, nil
	case http.StatusPaymentRequired, http.StatusConflict:
		return protocol.Reply{Code: protocol.Code(se.API.Code), Message: se.API.Message}, nil
	}
	return protocol.Reply{}, fmt.Errorf("create job: HTTP %d %s: %s", se.Status, se.API.Code, se.API.Message)
}

// Cancel implements fuzz.Target with POST /v1/jobs/{id}/cancel as the buyer.
func (t *StackTarget) Cancel(ctx context.Context, now time.Time, buyer, job string) (protocol.Reply, error) {
	if err := t.begin(now); err != nil {
		return protocol.Reply{}, err
	}
	b, err := t.buyer(buyer, "/v1/jobs/"+job+"/cancel")
	if err != nil {
		return protocol.Reply{}, err
	}
	status, _, err := b.Cancel(ctx, job)
	switch {
	case err == nil && status == http.StatusOK:
		return protocol.Reply{Code: protocol.CodeCancelled}, nil
	case err == nil:
		return protocol.Reply{Code: protocol.CodeCancelling}, nil // 202, the client's only other answer
	}
	se, err := refusal(err)
	if err != nil {
		return protocol.Reply{}, err
	}
	switch se.Status {
	case http.StatusConflict, http.StatusNotFound:
		return protocol.Reply{Code: protocol.Code(se.API.Code), Message: se.API.Message}, nil
	}
	return protocol.Reply{}, fmt.Errorf("cancel job: HTTP %d %s: %s", se.Status, se.API.Code, se.API.Message)
}

// buyer returns the API client of buyer, for a request to path (named in
// the error). It reaches the API handler in process, not over HTTP.
func (t *StackTarget) buyer(buyer, path string) (*loadgen.Buyer, error) {
	key, ok := t.apiKeys[buyer]
	if !ok {
		return nil, fmt.Errorf("POST %s: buyer %s has no API key", path, buyer)
	}
	// The host is never dialled: HandlerTransport serves the path.
	return &loadgen.Buyer{BaseURL: "http://api.invalid", Key: key,
		HTTP: &http.Client{Transport: loadgen.HandlerTransport{Handler: t.api}}}, nil
}

// refusal returns the reply of a call the client did not accept, whose
// status and error body the caller maps to a reply; a failed call, or a
// reply whose body is not JSON, is an error.
func refusal(err error) (*loadgen.StatusError, error) {
	var se *loadgen.StatusError
	if !errors.As(err, &se) {
		return nil, err
	}
	if !json.Valid(se.Body) {
		return nil, fmt.Errorf("%s %s: HTTP %d with a body that is not JSON", se.Method, se.Path, se.Status)
	}
	return se, nil
}

// PauseService implements fuzz.Target with POST
// /v1/admin/services/{name}/pause as the world's operator.
func (t *StackTarget) PauseService(ctx context.Context, now time.Time, service string) (protocol.Reply, error) {
	return t.admin(ctx, now, service, "pause")
}

// ResumeService implements fuzz.Target with POST
// /v1/admin/services/{name}/resume as the world's operator.
func (t *StackTarget) ResumeService(ctx context.Context, now time.Time, service string) (protocol.Reply, error) {
	return t.admin(ctx, now, service, "resume")
}

// admin sends an operator's POST /v1/admin/services/{name}/{action} to the
// API handler in process and maps its answer to the contract's reply: the
// body's code of a 200, not_found of a 404.
func (t *StackTarget) admin(ctx context.Context, now time.Time, service, action string) (protocol.Reply, error) {
	if err := t.begin(now); err != nil {
		return protocol.Reply{}, err
	}
	path := "/v1/admin/services/" + url.PathEscape(service) + "/" + action
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, "http://api.invalid"+path, nil)
	req.RemoteAddr = "127.0.0.1:1"
	req.Header.Set("Authorization", "Bearer "+fuzz.WorldOperator.Credential)
	rec := httptest.NewRecorder()
	t.api.ServeHTTP(rec, req)
	var body struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		return protocol.Reply{}, fmt.Errorf("POST %s: HTTP %d with a body that is not JSON", path, rec.Code)
	}
	switch rec.Code {
	case http.StatusOK, http.StatusNotFound:
		return protocol.Reply{Code: protocol.Code(body.Code), Message: body.Message}, nil
	}
	return protocol.Reply{}, fmt.Errorf("POST %s: HTTP %d %s: %s", path, rec.Code, body.Code, body.Message)
}
