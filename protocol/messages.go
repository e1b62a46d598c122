package protocol

import "time"

// Message types of SPEC section 5.
const (
	// Agent -> gateway.
	TypeHello    = "hello"
	TypeSlots    = "slots"
	TypeProgress = "progress"
	TypeFail     = "fail"
	TypeCommit   = "commit"
	// Gateway -> agent.
	TypeWelcome        = "welcome"
	TypeLeaseOffer     = "lease_offer"
	TypeProgressOK     = "progress_ok"
	TypeLeaseConflict  = "lease_conflict"
	TypeCancel         = "cancel"
	TypeDrain          = "drain"
	TypeCommitOK       = "commit_ok"
	TypeCommitRejected = "commit_rejected"
	TypeFailOK         = "fail_ok"
	TypeFailRejected   = "fail_rejected"
	TypeError          = "error"
)

// ReadLimitBytes is the largest frame the gateway accepts (close 1009 above).
const ReadLimitBytes = 64 << 10

// Hello opens a session: what the device offers and how many slots are free.
type Hello struct {
	Type         string   `json:"type"`
	AgentVersion string   `json:"agent_version"`
	Services     []string `json:"services"`
	SlotsTotal   int      `json:"slots_total"`
	SlotsFree    int      `json:"slots_free"`
}

// Slots reports the device's free slots.
type Slots struct {
	Type      string `json:"type"`
	SlotsFree int    `json:"slots_free"`
}

// Progress reports a lease phase and renews the lease.
type Progress struct {
	Type       string        `json:"type"`
	JobID      string        `json:"job_id"`
	AttemptID  string        `json:"attempt_id"`
	LeaseEpoch int           `json:"lease_epoch"`
	Phase      AttemptStatus `json:"phase"`
}

// Fail gives an attempt up with a machine code; the control plane decides requeue.
type Fail struct {
	Type        string      `json:"type"`
	JobID       string      `json:"job_id"`
	AttemptID   string      `json:"attempt_id"`
	LeaseEpoch  int         `json:"lease_epoch"`
	CommitToken string      `json:"commit_token"`
	FailureCode FailureCode `json:"failure_code"`
	Message     string      `json:"message"`
}

// Output describes an uploaded artifact.
type Output struct {
	Key    string `json:"key"`
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
}

// Commit claims success for an attempt with its output.
type Commit struct {
	Type        string `json:"type"`
	JobID       string `json:"job_id"`
	AttemptID   string `json:"attempt_id"`
	LeaseEpoch  int    `json:"lease_epoch"`
	CommitToken string `json:"commit_token"`
	Output      Output `json:"output"`
}

// Welcome accepts a session.
type Welcome struct {
	Type        string `json:"type"`
	DeviceID    string `json:"device_id"`
	LeaseTTLMs  int64  `json:"lease_ttl_ms"`
	HeartbeatMs int64  `json:"heartbeat_ms"`
}

// InputRef is where the agent downloads a job's input.
type InputRef struct {
	URL    string `json:"url"`
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
}

// OutputGrant is where the agent uploads an attempt's output.
type OutputGrant struct {
	Key       string `json:"key"`
	UploadURL string `json:"upload_url"`
}

// LeaseOffer hands an attempt to a device. CommitToken is the plaintext
// secret; it is sent once, here, and never again.
type LeaseOffer struct {
	Type           string            `json:"type"`
	JobID          string            `json:"job_id"`
	AttemptID      string            `json:"attempt_id"`
	AttemptNumber  int               `json:"attempt_number"`
	LeaseEpoch     int               `json:"lease_epoch"`
	CommitToken    string            `json:"commit_token"`
	LeaseExpiresAt time.Time         `json:"lease_expires_at"`
	Service        string            `json:"service"`
	Params         map[string]string `json:"params"`
	Input          InputRef          `json:"input"`
	Output         OutputGrant       `json:"output"`
}

// ProgressOK acknowledges progress with the renewed expiry.
type ProgressOK struct {
	Type           string    `json:"type"`
	JobID          string    `json:"job_id"`
	AttemptID      string    `json:"attempt_id"`
	LeaseExpiresAt time.Time `json:"lease_expires_at"`
}

// LeaseConflict refuses progress.
type LeaseConflict struct {
	Type      string         `json:"type"`
	JobID     string         `json:"job_id"`
	AttemptID string         `json:"attempt_id"`
	Reason    ConflictReason `json:"reason"`
}

// Cancel tells the device to stop an attempt.
type Cancel struct {
	Type      string `json:"type"`
	JobID     string `json:"job_id"`
	AttemptID string `json:"attempt_id"`
}

// Drain tells the device to take no more offers and let its running
// attempts finish (SPEC section 5, an operator's drain): the agent acts as
// on a first SIGTERM.
type Drain struct {
	Type string `json:"type"`
}

// CommitOK says the job succeeded with this attempt's output.
type CommitOK struct {
	Type      string `json:"type"`
	JobID     string `json:"job_id"`
	AttemptID string `json:"attempt_id"`
}

// CommitRejected says the commit lost, with the contract's code.
type CommitRejected struct {
	Type      string `json:"type"`
	JobID     string `json:"job_id"`
	AttemptID string `json:"attempt_id"`
	Code      Code   `json:"code"`
	Message   string `json:"message"`
}

// FailOK acknowledges a fail; Requeued says whether the job went back to the queue.
type FailOK struct {
	Type      string `json:"type"`
	JobID     string `json:"job_id"`
	AttemptID string `json:"attempt_id"`
	Requeued  bool   `json:"requeued"`
}

// FailRejected refuses a fail.
type FailRejected struct {
	Type      string `json:"type"`
	JobID     string `json:"job_id"`
	AttemptID string `json:"attempt_id"`
	Code      Code   `json:"code"`
}

// ErrorMessage answers a frame that could not be understood; nothing changed.
type ErrorMessage struct {
	Type    string `json:"type"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

// CodeBadMessage is the error code of a malformed frame.
const CodeBadMessage = "bad_message"

// AnswerAbout returns the job and attempt a gateway's answer to a device
// frame is about: progress_ok, lease_conflict, commit_ok, commit_rejected,
// fail_ok or fail_rejected. ok is false for any other frame.
func AnswerAbout(msg any) (jobID, attemptID string, ok bool) {
	switch m := msg.(type) {
	case *ProgressOK:
		return m.JobID, m.AttemptID, true
	case *LeaseConflict:
		return m.JobID, m.AttemptID, true
	case *CommitOK:
		return m.JobID, m.AttemptID, true
	case *CommitRejected:
		return m.JobID, m.AttemptID, true
	case *FailOK:
		return m.JobID, m.AttemptID, true
	case *FailRejected:
		return m.JobID, m.AttemptID, true
	}
	return "", "", false
}
