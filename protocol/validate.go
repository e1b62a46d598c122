package protocol

import "fmt"

// maxTokenLen bounds a presented commit token; real ones are 32 characters.
const maxTokenLen = 128

func bad(field, format string, args ...any) error {
	return &DecodeError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// ValidID reports whether s is a canonical lowercase UUID (8-4-4-4-12 hex).
func ValidID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
				return false
			}
		}
	}
	return true
}

func validateIdentity(jobID, attemptID string, epoch int) error {
	if !ValidID(jobID) {
		return bad("job_id", "must be a uuid")
	}
	if !ValidID(attemptID) {
		return bad("attempt_id", "must be a uuid")
	}
	if epoch < 1 {
		return bad("lease_epoch", "must be >= 1, got %d", epoch)
	}
	return nil
}

func validateToken(tok string) error {
	if tok == "" || len(tok) > maxTokenLen {
		return bad("commit_token", "must be 1..%d characters", maxTokenLen)
	}
	return nil
}

func (m *Hello) validate() error {
	if m.AgentVersion == "" {
		return bad("agent_version", "must not be empty")
	}
	if len(m.Services) == 0 {
		return bad("services", "must name at least one service")
	}
	for i, s := range m.Services {
		if s == "" {
			return bad(fmt.Sprintf("services[%d]", i), "must not be empty")
		}
	}
	if m.SlotsTotal < 1 || m.SlotsTotal > 64 {
		return bad("slots_total", "must be 1..64, got %d", m.SlotsTotal)
	}
	if m.SlotsFree < 0 || m.SlotsFree > m.SlotsTotal {
		return bad("slots_free", "must be 0..slots_total, got %d", m.SlotsFree)
	}
	return nil
}

func (m *Slots) validate() error {
	if m.SlotsFree < 0 || m.SlotsFree > 64 {
		return bad("slots_free", "must be 0..64, got %d", m.SlotsFree)
	}
	return nil
}

func (m *Progress) validate() error {
	if err := validateIdentity(m.JobID, m.AttemptID, m.LeaseEpoch); err != nil {
		return err
	}
	if !m.Phase.LeasePhase() {
		return bad("phase", "must be a lease phase (leased, downloading, running, uploading), got %q", m.Phase)
	}
	return nil
}

// validate leaves failure_code to the service layer: an unknown code is the
// contract's bad_failure_code, not a malformed frame.
func (m *Fail) validate() error {
	if err := validateIdentity(m.JobID, m.AttemptID, m.LeaseEpoch); err != nil {
		return err
	}
	if err := validateToken(m.CommitToken); err != nil {
		return err
	}
	if m.FailureCode == "" {
		return bad("failure_code", "must not be empty")
	}
	if len(m.Message) > 4096 {
		return bad("message", "must be at most 4096 bytes")
	}
	return nil
}

func (m *Commit) validate() error {
	if err := validateIdentity(m.JobID, m.AttemptID, m.LeaseEpoch); err != nil {
		return err
	}
	if err := validateToken(m.CommitToken); err != nil {
		return err
	}
	if m.Output.Key == "" {
		return bad("output.key", "must not be empty")
	}
	if m.Output.Bytes < 0 {
		return bad("output.bytes", "must be >= 0")
	}
	if !ValidTokenHash(m.Output.SHA256) {
		return bad("output.sha256", "must be 64 lowercase hex characters")
	}
	return nil
}

func (m *Welcome) validate() error {
	if m.DeviceID == "" {
		return bad("device_id", "must not be empty")
	}
	if m.LeaseTTLMs <= 0 {
		return bad("lease_ttl_ms", "must be positive, got %d", m.LeaseTTLMs)
	}
	if m.HeartbeatMs <= 0 {
		return bad("heartbeat_ms", "must be positive, got %d", m.HeartbeatMs)
	}
	return nil
}

func (m *LeaseOffer) validate() error {
	if err := validateIdentity(m.JobID, m.AttemptID, m.LeaseEpoch); err != nil {
		return err
	}
	if m.AttemptNumber < 1 {
		return bad("attempt_number", "must be >= 1")
	}
	if err := validateToken(m.CommitToken); err != nil {
		return err
	}
	if m.Service == "" {
		return bad("service", "must not be empty")
	}
	return nil
}

func (m *ProgressOK) validate() error     { return nil }
func (m *LeaseConflict) validate() error  { return nil }
func (m *Cancel) validate() error         { return nil }
func (m *Drain) validate() error          { return nil }
func (m *CommitOK) validate() error       { return nil }
func (m *CommitRejected) validate() error { return nil }
func (m *FailOK) validate() error         { return nil }
func (m *FailRejected) validate() error   { return nil }
func (m *ErrorMessage) validate() error   { return nil }
