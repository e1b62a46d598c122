package client

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/rendermac/rendermac/protocol/buyer"
)

// CreateRequest is a job to create: the body of POST /v1/jobs and its
// Idempotency-Key.
type CreateRequest struct {
	// Service names a catalogue entry (rendermac admin services lists them).
	Service string
	// Params are the service's params as text ("crf": "23"); they are sent
	// byte for byte, so a value that is not UTF-8 reaches the API as given
	// (and is refused there, naming the param). Nil sends JSON null.
	Params map[string]string
	// Input is an inline input (input_base64, at most 32 MiB); InputID
	// names an uploaded one (Upload, UploadFile) instead. Neither: no input.
	Input   []byte
	InputID string
	// MaxAttempts and AdmissionWindowS, when nil, take the server's
	// defaults; a set one is sent as is, zero included.
	MaxAttempts      *int
	AdmissionWindowS *int64
	// IdempotencyKey is sent as the Idempotency-Key header: creating again
	// with the same key and body answers the same job (Replayed). Empty:
	// Create draws a random key, returned in Created, so that a caller
	// unsure whether its create arrived can repeat it without a second job.
	IdempotencyKey string
	// NoIdempotencyKey sends no key at all: every such create is a new job.
	NoIdempotencyKey bool
}

// createBody is the JSON of POST /v1/jobs but params, which appendParams
// writes.
type createBody struct {
	Service          string `json:"service"`
	Input            []byte `json:"input_base64,omitempty"`
	InputID          string `json:"input_id,omitempty"`
	MaxAttempts      *int   `json:"max_attempts,omitempty"`
	AdmissionWindowS *int64 `json:"admission_window_s,omitempty"`
}

// Created is the answer of Create.
type Created struct {
	Job buyer.JobDetail
	// Status is 201 for a new job, 200 for the earlier job of a repeated
	// Idempotency-Key and body.
	Status int
	// IdempotencyKey is the key sent (drawn by Create when the request had
	// none); empty with NoIdempotencyKey.
	IdempotencyKey string
}

// Replayed reports whether the job is the earlier one of a repeated key.
func (c Created) Replayed() bool { return c.Status == http.StatusOK }

// NewIdempotencyKey draws a random Idempotency-Key (26 base32 characters
// from crypto/rand).
func NewIdempotencyKey() string { return "rmc-" + rand.Text() }

// Create submits req through POST /v1/jobs. A refusal (422
// validation_error naming the field, 402 insufficient_funds, 409
// idempotency_conflict, 429 rate_limited...) is an *Error.
func (c *Client) Create(ctx context.Context, req CreateRequest) (Created, error) {
	body, err := json.Marshal(createBody{Service: req.Service, Input: req.Input, InputID: req.InputID,
		MaxAttempts: req.MaxAttempts, AdmissionWindowS: req.AdmissionWindowS})
	if err != nil {
		return Created{}, fmt.Errorf("create job: %w", err)
	}
	body = append(appendParams(append(body[:len(body)-1], `,"params":`...), req.Params), '}')
	key := req.IdempotencyKey
	if key == "" && !req.NoIdempotencyKey {
		key = NewIdempotencyKey()
	}
	r := request{method: http.MethodPost, path: "/v1/jobs", body: body, want: []int{http.StatusCreated}}
	if key != "" && !req.NoIdempotencyKey {
		r.header = http.Header{"Idempotency-Key": {key}}
		r.want = append(r.want, http.StatusOK) // only a repeated key may answer 200
	} else {
		key = ""
	}
	out := Created{IdempotencyKey: key}
	out.Status, err = c.do(ctx, r, &out.Job)
	if err != nil {
		return out, err
	}
	if out.Job.ID == "" {
		return out, fmt.Errorf("POST /v1/jobs: a reply without a job id")
	}
	return out, nil
}

// Get reads GET /v1/jobs/{id}: the job, its attempts and, once it
// succeeded, its output with a download grant.
func (c *Client) Get(ctx context.Context, id string) (buyer.JobDetail, error) {
	var job buyer.JobDetail
	_, err := c.do(ctx, request{method: http.MethodGet, path: "/v1/jobs/" + url.PathEscape(id), want: []int{http.StatusOK}}, &job)
	return job, err
}

// Cancellation is the answer of Cancel.
type Cancellation struct {
	Job buyer.JobDetail
	// Status is 200 when the job is cancelled, 202 when it is cancelling
	// (its live attempt was told, and the job ends when the device answers
	// or its lease expires).
	Status int
}

// Pending reports whether the cancel is still in progress (202).
func (c Cancellation) Pending() bool { return c.Status == http.StatusAccepted }

// Cancel is POST /v1/jobs/{id}/cancel. A job already ended is a 409
// job_terminal *Error.
func (c *Client) Cancel(ctx context.Context, id string) (Cancellation, error) {
	var out Cancellation
	var err error
	out.Status, err = c.do(ctx, request{method: http.MethodPost, path: "/v1/jobs/" + url.PathEscape(id) + "/cancel",
		want: []int{http.StatusOK, http.StatusAccepted}}, &out.Job)
	return out, err
}

// ListOptions select the jobs of List and ListPage.
type ListOptions struct {
	// Status keeps the jobs of that status alone (empty: every status).
	Status string
	// Limit is the page size, 1..500 (0: the server's, 100).
	Limit int
	// Cursor is a page's NextCursor (empty: the first page).
	Cursor string
}

func (o ListOptions) query() string {
	q := url.Values{}
	if o.Status != "" {
		q.Set("status", o.Status)
	}
	if o.Limit != 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	if o.Cursor != "" {
		q.Set("cursor", o.Cursor)
	}
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}

// ListPage reads one page of GET /v1/jobs: the buyer's jobs, newest first.
func (c *Client) ListPage(ctx context.Context, opts ListOptions) (buyer.JobsPage, error) {
	var page buyer.JobsPage
	_, err := c.do(ctx, request{method: http.MethodGet, path: "/v1/jobs" + opts.query(), want: []int{http.StatusOK}}, &page)
	return page, err
}

// List yields the buyer's jobs newest first, from opts.Cursor (empty: the
// newest) to the last page, reading a page at a time as the loop asks.
// Every job that existed when the first page was read is yielded exactly
// once (SPEC: keyset pages). An error is yielded once, and ends the list.
func (c *Client) List(ctx context.Context, opts ListOptions) iter.Seq2[buyer.Job, error] {
	return func(yield func(buyer.Job, error) bool) {
		for {
			page, err := c.ListPage(ctx, opts)
			if err != nil {
				yield(buyer.Job{}, err)
				return
			}
			for _, j := range page.Jobs {
				if !yield(j, nil) {
					return
				}
			}
			if page.NextCursor == "" {
				return
			}
			opts.Cursor = page.NextCursor
		}
	}
}

// EventsPage reads one page of GET /v1/jobs/{id}/events: the job's
// journal in append order after cursor (empty: from the start). Its
// NextCursor is always set, so that it can be polled for later events.
func (c *Client) EventsPage(ctx context.Context, id string, limit int, cursor string) (buyer.EventsPage, error) {
	var page buyer.EventsPage
	_, err := c.do(ctx, request{method: http.MethodGet,
		path: "/v1/jobs/" + url.PathEscape(id) + "/events" + ListOptions{Limit: limit, Cursor: cursor}.query(),
		want: []int{http.StatusOK}}, &page)
	return page, err
}

// Events yields the job's journal as it stands, page after page, in
// append order. An error is yielded once, and ends the sequence.
func (c *Client) Events(ctx context.Context, id string) iter.Seq2[buyer.Event, error] {
	return func(yield func(buyer.Event, error) bool) {
		cursor := ""
		for {
			page, err := c.EventsPage(ctx, id, 0, cursor)
			if err != nil {
				yield(buyer.Event{}, err)
				return
			}
			for _, e := range page.Events {
				if !yield(e, nil) {
					return
				}
			}
			if !page.HasMore {
				return
			}
			cursor = page.NextCursor
		}
	}
}

// AllEvents collects Events.
func (c *Client) AllEvents(ctx context.Context, id string) ([]buyer.Event, error) {
	var out []buyer.Event
	for e, err := range c.Events(ctx, id) {
		if err != nil {
			return out, err
		}
		out = append(out, e)
	}
	return out, nil
}

// WaitOptions tune Wait.
type WaitOptions struct {
	// OnChange, when set, is called with the job at the first read and
	// whenever its status, attempt count or latest attempt's status changed
	// since the previous read: a progress report.
	OnChange func(buyer.JobDetail)
}

// Wait reads the job until it is terminal (succeeded, failed or cancelled)
// and returns it as last read; it does not judge the outcome. Between two
// reads it waits the poll interval, which grows while nothing changes
// (WithPollInterval), or the server's Retry-After when a read was refused
// as temporary (429, 502, 503, 504), which it then retries. Any other
// refusal (404 not_found...) or ctx's end returns the error.
func (c *Client) Wait(ctx context.Context, id string, opts WaitOptions) (buyer.JobDetail, error) {
	interval := c.pollMin
	var last buyer.JobDetail
	first := true
	for {
		job, err := c.Get(ctx, id)
		var apiErr *Error
		switch {
		case err == nil:
			if first || changed(last, job) {
				interval = c.pollMin
				if opts.OnChange != nil {
					opts.OnChange(job)
				}
			} else {
				interval = min(interval+interval/2, c.pollMax)
			}
			first, last = false, job
			if job.Status.Terminal() {
				return job, nil
			}
		case errors.As(err, &apiErr) && apiErr.Temporary():
			if apiErr.RetryAfter > 0 {
				interval = apiErr.RetryAfter
			} else {
				interval = min(interval*2, c.pollMax)
			}
		default:
			return last, fmt.Errorf("wait for job %s: %w", id, err)
		}
		t := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return last, fmt.Errorf("wait for job %s: %w", id, context.Cause(ctx))
		case <-t.C:
		}
	}
}

// changed reports whether a job moved between two reads.
func changed(a, b buyer.JobDetail) bool {
	if a.Status != b.Status || a.AttemptCount != b.AttemptCount || len(a.Attempts) != len(b.Attempts) {
		return true
	}
	n := len(a.Attempts)
	return n > 0 && a.Attempts[n-1].Status != b.Attempts[n-1].Status
}
