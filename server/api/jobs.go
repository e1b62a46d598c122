package api

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/protocol/buyer"
	"github.com/rendermac/rendermac/server/artifact"
)

// jsonSlackBytes is what a create body may carry besides input_base64.
const jsonSlackBytes = 64 << 10

// bodyField maps the service layer's validation fields to the names the
// client sent, so a 422 names something the client can find in its request.
var bodyField = map[string]string{
	"admission_window": "admission_window_s",
	"input.bytes":      "input_base64",
	"input.sha256":     "input_base64",
	"idempotency_key":  "Idempotency-Key",
}

// createJob is POST /v1/jobs: 201 with the job, 200 with the earlier job
// for a repeated Idempotency-Key and body, 422 validation_error, 402
// insufficient_funds, 409 idempotency_conflict, 429 rate_limited past the
// buyer's JobsPerBuyer (every request counts, replays included).
func (a *API) createJob(w http.ResponseWriter, r *http.Request, buyerID string) {
	if ok, wait := a.limits.jobs.Allow(buyerID); !ok {
		a.refuse(w, limitJobs, "job creations by this buyer", wait)
		return
	}
	req, input, why, rerr := a.readCreate(w, r, buyerID)
	if rerr != nil {
		rerr.write(w)
		return
	}
	var reply protocol.Reply
	var err error
	switch {
	case input.err != nil:
		err = input.err
	case input.upload != "":
		reply, err = a.createJobWithInput(r.Context(), a.pinned(), req, a.linkInput(input.upload, req.Input))
	case len(input.inline) > 0:
		reply, err = a.createJobWithInput(r.Context(), a.pinned(), req, a.storeInput(input.inline, req.Input.SHA256))
	default:
		reply, err = a.svc.CreateJob(r.Context(), a.pinned(), req)
	}
	if err != nil {
		a.internal(w, r, err)
		return
	}
	switch reply.Code {
	case protocol.CodeCreated:
		status := http.StatusCreated
		if reply.Existing {
			status = http.StatusOK
		}
		w.Header().Set("Location", "/v1/jobs/"+reply.JobID)
		a.writeJob(w, r, status, buyerID, reply.JobID)
	case protocol.CodeValidation:
		field := reply.Field
		if f, ok := bodyField[field]; ok {
			field = f
		}
		if strings.HasPrefix(reply.Field, "input.") {
			field = input.field
		}
		message, ok := why[reply.Field]
		if !ok {
			message = field + " is invalid"
		}
		invalid(field, "%s", message).write(w)
	case protocol.CodeInsufficientFunds:
		writeError(w, http.StatusPaymentRequired, string(reply.Code), "balance does not cover the service's price")
	case protocol.CodeIdempotencyConflict:
		writeError(w, http.StatusConflict, string(reply.Code),
			"Idempotency-Key was already used with a different request")
	case protocol.CodeNotFound: // the key's buyer vanished after authentication
		unauthorized(w, "unknown buyer")
	default:
		a.internal(w, r, fmt.Errorf("create job: unexpected reply %q", reply.Code))
	}
}

// createInput is where a create request's input comes from: inline bytes
// (input_base64), an upload (input_id: the checked upload's key), or none.
// field is the body field a refusal of the input names; err is a store
// failure met while checking an upload.
type createInput struct {
	inline []byte
	upload string
	field  string
	err    error
}

// readCreate decodes the body into a request. Only a body it cannot read
// as one (malformed, too large, an unknown field) is refused here: the
// service layer validates the values, in the contract's order, and writes
// nothing when one is refused. A field the API cannot convert becomes a
// value the service layer refuses for that field, and why, keyed by the
// service layer's field, says what was wrong with it.
func (a *API) readCreate(w http.ResponseWriter, r *http.Request, buyerID string) (
	req protocol.CreateJobRequest, input createInput, why map[string]string, rerr *requestError) {
	limit := base64.StdEncoding.EncodedLen(int(a.cfg.MaxInputBytes)) + jsonSlackBytes
	raw, rerr := readBody(w, r, int64(limit))
	if rerr != nil {
		return req, input, nil, rerr
	}
	// Not decodeJSON: a param value that is not UTF-8 is the service
	// layer's to refuse, in its place in the order.
	var body createJobBody
	if rerr := parseJSON(raw, &body); rerr != nil {
		return req, input, nil, rerr
	}
	why = map[string]string{}
	svc, known := protocol.FindService(a.cfg.Services, body.Service.v)
	body.Params.convert(svc)
	req = protocol.CreateJobRequest{
		BuyerID: buyerID, Service: body.Service.v, Params: body.Params.m,
		MaxAttempts:     protocol.MaxAttemptsDefault,
		AdmissionWindow: protocol.AdmissionWindowDefault,
		IdempotencyKey:  r.Header.Get("Idempotency-Key"),
	}
	if err := body.Service.err; err != nil {
		req.Service, why["service"] = unknownService, typeMessage("service", err)
	} else if !known {
		why["service"] = serviceWhy(a.cfg.Services, req.Service)
	}
	if message, ok := paramsWhy(svc, body.Params.m); ok {
		why["params"] = message
	}
	if err := body.Params.err; err != nil {
		req.Params, why["params"] = map[string]string{invalidParamKeyName: ""}, typeMessage(body.Params.at, err)
		if body.Params.at != "params" && !isTypeError(err) {
			why["params"] = body.Params.at + " " + err.Error()
		}
	}
	switch m := body.MaxAttempts; {
	case m.err != nil:
		req.MaxAttempts, why["max_attempts"] = invalidMaxAttempts, typeMessage("max_attempts", m.err)
	case m.set:
		req.MaxAttempts = m.v
		why["max_attempts"] = fmt.Sprintf("max_attempts must be an integer %d..%d, got %d",
			protocol.MaxAttemptsMin, protocol.MaxAttemptsMax, m.v)
	}
	switch s := body.AdmissionWindowS; {
	case s.err != nil:
		req.AdmissionWindow, why["admission_window"] = invalidWindow, typeMessage("admission_window_s", s.err)
	case s.set:
		// Out-of-range values are the service's to refuse; only values whose
		// conversion would overflow are mapped to an equally invalid one.
		why["admission_window"] = fmt.Sprintf("admission_window_s must be an integer %d..%d (seconds), got %d",
			int64(protocol.AdmissionWindowMin/time.Second), int64(protocol.AdmissionWindowMax/time.Second), s.v)
		req.AdmissionWindow = invalidWindow
		if s.v >= 0 && s.v <= math.MaxInt64/int64(time.Second) {
			req.AdmissionWindow = time.Duration(s.v) * time.Second
		}
	}
	if body.InputID.set {
		return a.readUploadedInput(r.Context(), req, body, why)
	}
	input.field = "input_base64"
	inline, err := base64.StdEncoding.DecodeString(body.InputBase64.v)
	switch {
	case body.InputBase64.err != nil:
		why["input.bytes"] = typeMessage("input_base64", body.InputBase64.err)
	case err != nil:
		why["input.bytes"] = fmt.Sprintf("input_base64 is not standard base64: %v", err)
	case int64(len(inline)) > a.cfg.MaxInputBytes:
		return req, input, nil, &requestError{status: http.StatusRequestEntityTooLarge,
			body: buyer.Error{Code: buyer.CodeBodyTooLarge, Field: "input_base64",
				Message: fmt.Sprintf("input exceeds %d bytes; upload it (POST /v1/inputs) and send input_id", a.cfg.MaxInputBytes)}}
	default:
		sum := sha256.Sum256(inline)
		req.Input = protocol.InputRef{Bytes: int64(len(inline)), SHA256: hex.EncodeToString(sum[:])}
		input.inline = inline
		return req, input, why, nil
	}
	req.Input.Bytes = invalidInputBytes
	return req, input, why, nil
}

// readUploadedInput takes the request's input from the upload input_id
// names, checked against what it declares. A refusal (both input fields,
// a wrong type, an unknown id, a missing, short or other upload) is an
// input the service layer refuses in the input's place in the order,
// named input_id.
func (a *API) readUploadedInput(ctx context.Context, req protocol.CreateJobRequest, body createJobBody,
	why map[string]string) (protocol.CreateJobRequest, createInput, map[string]string, *requestError) {
	input := createInput{field: "input_id"}
	var refused string
	switch {
	case body.InputBase64.set:
		refused = "give input_base64 or input_id, not both"
	case body.InputID.err != nil:
		refused = typeMessage("input_id", body.InputID.err)
	default:
		req.Input, input.upload, refused, input.err = a.uploadedInput(ctx, req.BuyerID, body.InputID.v)
	}
	if refused != "" {
		req.Input, why["input.bytes"] = protocol.InputRef{Bytes: invalidInputBytes}, refused
	}
	return req, input, why, nil
}

// storeInput returns the callback that writes a job's input at
// inputs/{job_id} inside the creating transaction, so that a job is never
// leasable before its input exists. It may run more than once (the service
// re-runs a transaction after a serialization failure); Put replaces the
// object whole, so a re-run is harmless.
func (a *API) storeInput(input []byte, sha string) func(context.Context, string) error {
	return func(ctx context.Context, jobID string) error {
		obj, err := a.store.Put(ctx, artifact.InputKey(jobID), bytes.NewReader(input))
		if err != nil {
			return fmt.Errorf("store input of job %s: %w", jobID, err)
		}
		if obj.SHA256 != sha || obj.Bytes != int64(len(input)) {
			return fmt.Errorf("store input of job %s: stored %d bytes %s, want %d bytes %s",
				jobID, obj.Bytes, obj.SHA256, len(input), sha)
		}
		return nil
	}
}

// cancelJob is POST /v1/jobs/{id}/cancel: 200 with the cancelled job, 202
// with a cancelling one (the device is told; the job ends when it stops),
// 409 job_terminal, 404 not_found. The status says what the cancel did; the
// body is the job as read after it committed, which a device that stopped
// at once may already have cancelled.
func (a *API) cancelJob(w http.ResponseWriter, r *http.Request, buyerID string) {
	id := r.PathValue("id")
	reply, err := a.svc.Cancel(r.Context(), a.pinned(), buyerID, id)
	if err != nil {
		a.internal(w, r, err)
		return
	}
	switch reply.Code {
	case protocol.CodeCancelled:
		a.writeJob(w, r, http.StatusOK, buyerID, id)
	case protocol.CodeCancelling:
		a.writeJob(w, r, http.StatusAccepted, buyerID, id)
	case protocol.CodeJobTerminal:
		writeError(w, http.StatusConflict, string(reply.Code), "job is already terminal")
	case protocol.CodeNotFound:
		jobNotFound(w)
	default:
		a.internal(w, r, fmt.Errorf("cancel job: unexpected reply %q", reply.Code))
	}
}

// jobNotFound is the one answer for a missing job and for another buyer's.
func jobNotFound(w http.ResponseWriter) {
	writeError(w, http.StatusNotFound, string(protocol.CodeNotFound), "no such job")
}
