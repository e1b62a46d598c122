package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/rendermac/rendermac/server/api"
)

// maxReplyBytes bounds a reply body read; the API's replies are far smaller.
const maxReplyBytes = 1 << 20

// Buyer is one buyer's client of the HTTP API: every request carries the
// buyer's API key. It is safe for concurrent use when HTTP is.
type Buyer struct {
	// BaseURL is the server's, without a trailing slash.
	BaseURL string
	// Key is the buyer's API key.
	Key string
	// HTTP sends the requests.
	HTTP *http.Client
}

// JobRequest is the body of POST /v1/jobs and its Idempotency-Key. A nil
// MaxAttempts or AdmissionWindowS is left out, so the job takes the
// server's default; a set one is sent, zero included (the harness sends
// zeros for the API to refuse). A nil Input is no input.
type JobRequest struct {
	Service string `json:"service"`
	// Params are sent byte for byte (see appendParams), so a value that is
	// not UTF-8 reaches the API as drawn; nil is sent as JSON null.
	Params map[string]string `json:"-"`
	// Input is sent as input_base64 (encoding/json writes []byte so).
	Input []byte `json:"input_base64,omitempty"`
	// InputID names an uploaded input (UploadInput) instead.
	InputID          string `json:"input_id,omitempty"`
	MaxAttempts      *int   `json:"max_attempts,omitempty"`
	AdmissionWindowS *int64 `json:"admission_window_s,omitempty"`
	// IdempotencyKey, when not empty, is sent as the Idempotency-Key header.
	IdempotencyKey string `json:"-"`
}

// JobsPage is one page of GET /v1/jobs.
type JobsPage struct {
	Jobs []api.Job `json:"jobs"`
	// NextCursor pages on; empty on the last page.
	NextCursor string `json:"next_cursor"`
}

// StatusError is a reply with another status than the call wants: the
// status, the raw body and, when the body is the API's error JSON, its
// code, message and field.
type StatusError struct {
	Method, Path string
	Status       int
	Body         []byte
	// API is the body decoded as the API's error JSON (zero when it is not).
	API api.Error
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("%s %s: HTTP %d: %s", e.Method, e.Path, e.Status, e.Body)
}

// CreateJob submits req through POST /v1/jobs. It returns the status
// (201: created; 200: the earlier job of a repeated Idempotency-Key and
// body) and the job as the reply shows it; any other status is a
// *StatusError.
func (b *Buyer) CreateJob(ctx context.Context, req JobRequest) (int, api.JobDetail, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return 0, api.JobDetail{}, err
	}
	// encoding/json would replace bytes that are not UTF-8 in a param, so
	// params are appended to the marshalled object by hand.
	body = append(appendParams(append(body[:len(body)-1], `,"params":`...), req.Params), '}')
	var header http.Header
	want := []int{http.StatusCreated}
	if req.IdempotencyKey != "" { // only a repeated key may answer 200
		header = http.Header{"Idempotency-Key": {req.IdempotencyKey}}
		want = append(want, http.StatusOK)
	}
	var job api.JobDetail
	status, err := b.call(ctx, http.MethodPost, "/v1/jobs", header, body, &job, want...)
	if err != nil {
		return status, api.JobDetail{}, err
	}
	if job.ID == "" {
		return status, api.JobDetail{}, fmt.Errorf("POST /v1/jobs: a reply without a job id")
	}
	return status, job, nil
}

// Job reads GET /v1/jobs/{id}.
func (b *Buyer) Job(ctx context.Context, id string) (api.JobDetail, error) {
	var job api.JobDetail
	_, err := b.call(ctx, http.MethodGet, "/v1/jobs/"+id, nil, nil, &job, http.StatusOK)
	return job, err
}

// Events reads GET /v1/jobs/{id}/events (its first page).
func (b *Buyer) Events(ctx context.Context, id string) ([]api.Event, error) {
	var reply struct {
		Events []api.Event `json:"events"`
	}
	_, err := b.call(ctx, http.MethodGet, "/v1/jobs/"+id+"/events", nil, nil, &reply, http.StatusOK)
	return reply.Events, err
}

// Cancel is POST /v1/jobs/{id}/cancel. It returns the status (200: the job
// is cancelled; 202: cancelling, its live attempt told) and the job as the
// reply shows it; any other status is a *StatusError.
func (b *Buyer) Cancel(ctx context.Context, id string) (int, api.JobDetail, error) {
	var job api.JobDetail
	status, err := b.call(ctx, http.MethodPost, "/v1/jobs/"+id+"/cancel", nil, nil, &job, http.StatusOK, http.StatusAccepted)
	return status, job, err
}

// ListJobs reads one page of GET /v1/jobs: limit 0 and an empty cursor
// are left out (the server's page size; the first page).
func (b *Buyer) ListJobs(ctx context.Context, limit int, cursor string) (JobsPage, error) {
	var query []string
	if limit != 0 {
		query = append(query, "limit="+strconv.Itoa(limit))
	}
	if cursor != "" {
		query = append(query, "cursor="+url.QueryEscape(cursor))
	}
	path := "/v1/jobs"
	if len(query) > 0 {
		path += "?" + strings.Join(query, "&")
	}
	var page JobsPage
	_, err := b.call(ctx, http.MethodGet, path, nil, nil, &page, http.StatusOK)
	return page, err
}

// call sends one request and decodes a reply whose status is one of want
// into out; another status is a *StatusError.
// header's fields are added to the request's.
func (b *Buyer) call(ctx context.Context, method, path string, header http.Header, body []byte, out any, want ...int) (int, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, b.BaseURL+path, rd)
	if err != nil {
		return 0, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Authorization", "Bearer "+b.Key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := b.HTTP.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxReplyBytes))
	if err != nil {
		return resp.StatusCode, err
	}
	for _, w := range want {
		if resp.StatusCode == w {
			if err := json.Unmarshal(data, out); err != nil {
				return resp.StatusCode, fmt.Errorf("%s %s: bad body %q: %w", method, path, data, err)
			}
			return resp.StatusCode, nil
		}
	}
	se := &StatusError{Method: method, Path: path, Status: resp.StatusCode, Body: data}
	_ = json.Unmarshal(data, &se.API) // not every refusal has a JSON body
	return resp.StatusCode, se
}
