package buyer

import (
	"time"

	"github.com/rendermac/rendermac/protocol"
)

// Job is the buyer's view of a job, as GET /v1/jobs lists it.
type Job struct {
	ID                string             `json:"id"`
	Status            protocol.JobStatus `json:"status"`
	Service           string             `json:"service"`
	Params            map[string]string  `json:"params"`
	Input             Input              `json:"input"`
	MaxAttempts       int                `json:"max_attempts"`
	AttemptCount      int                `json:"attempt_count"`
	FailureCode       string             `json:"failure_code,omitempty"`
	CreatedAt         time.Time          `json:"created_at"`
	AdmissionDeadline time.Time          `json:"admission_deadline"`
	UpdatedAt         time.Time          `json:"updated_at"`
}

// Input describes a job's input (bytes 0 for a job without one).
type Input struct {
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
}

// JobDetail is GET /v1/jobs/{id}: the job with its attempts and, once it
// succeeded, its output with a download grant.
type JobDetail struct {
	Job
	Attempts []Attempt `json:"attempts"`
	Output   *Output   `json:"output,omitempty"`
}

// Attempt is one execution of a job. Commit tokens and their hashes are
// never part of it.
type Attempt struct {
	ID             string                 `json:"id"`
	Number         int                    `json:"number"`
	Status         protocol.AttemptStatus `json:"status"`
	DeviceID       string                 `json:"device_id"`
	LeaseEpoch     int                    `json:"epoch"`
	LeaseExpiresAt time.Time              `json:"lease_expires_at"`
	FailureCode    string                 `json:"failure_code,omitempty"`
	StartedAt      time.Time              `json:"started_at"`
	EndedAt        *time.Time             `json:"ended_at,omitempty"`
	// Encoder is the encoder the verified output's video stream names
	// (libx264, hevc_videotoolbox...), when verification ran ffprobe.
	Encoder string `json:"encoder,omitempty"`
	// VerifyMessage says why verification refused the output, naming the
	// field and both values ("codec: want h264, got hevc").
	VerifyMessage string `json:"verify_message,omitempty"`
	// FailureMessage is why the device gave the attempt up, in its words
	// (the runner's error), cleaned of secrets and at most 512 bytes.
	FailureMessage string `json:"failure_message,omitempty"`
}

// Output is a succeeded job's verified output.
type Output struct {
	Key         string `json:"key"`
	Bytes       int64  `json:"bytes"`
	SHA256      string `json:"sha256"`
	DownloadURL string `json:"download_url"`
}

// Event is one journal row of a job (SPEC section 3: job_events).
type Event struct {
	Seq        int64          `json:"seq"`
	Kind       string         `json:"kind"`
	AttemptID  string         `json:"attempt_id,omitempty"`
	FromStatus string         `json:"from_status,omitempty"`
	ToStatus   string         `json:"to_status"`
	Code       string         `json:"code,omitempty"`
	Actor      protocol.Actor `json:"actor"`
	At         time.Time      `json:"at"`
}

// JobsPage is the body of GET /v1/jobs: one keyset page, newest first.
type JobsPage struct {
	Jobs []Job `json:"jobs"`
	// NextCursor pages on; absent on the last page.
	NextCursor string `json:"next_cursor,omitempty"`
}

// EventsPage is the body of GET /v1/jobs/{id}/events.
type EventsPage struct {
	Events []Event `json:"events"`
	// NextCursor is always given: the position after the last event
	// returned (or the request's own, when none was), so that a client can
	// poll it for events appended later.
	NextCursor string `json:"next_cursor"`
	// HasMore says the journal held more events than this page.
	HasMore bool `json:"has_more"`
}

// InputDeclaration is the body of POST /v1/inputs: the size and SHA-256
// (64 lowercase hex) of the bytes about to be uploaded.
type InputDeclaration struct {
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
}

// InputUpload is the reply of POST /v1/inputs: where and how to PUT the
// bytes, until when.
type InputUpload struct {
	InputID       string            `json:"input_id"`
	Bytes         int64             `json:"bytes"`
	SHA256        string            `json:"sha256"`
	UploadURL     string            `json:"upload_url"`
	UploadMethod  string            `json:"upload_method"`
	UploadHeaders map[string]string `json:"upload_headers"`
	ExpiresAt     time.Time         `json:"expires_at"`
}

// Error is the JSON body of every error response.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// Field names the offending request field of a validation_error.
	Field string `json:"field,omitempty"`
}
