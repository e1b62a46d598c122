package contract

import (
	"time"

	"github.com/rendermac/rendermac/protocol"
)

// Tables is what protocol encodes, in the form the checks compare with the
// text. Protocol builds it from the package; a test alters a copy to show
// that a wrong table is reported.
type Tables struct {
	// FailureCodes are the codes an agent may send; Retryable those of them
	// after which the control plane may requeue. ControlPlaneCodes are the
	// failure codes only the control plane sets.
	FailureCodes      []string
	Retryable         map[string]bool
	ControlPlaneCodes []string
	// JobStatuses and AttemptStatuses in protocol's table order; the Next
	// maps hold every transition the Assert functions allow.
	JobStatuses     []string
	JobNext         map[string][]string
	JobTerminal     map[string]bool
	AttemptStatuses []string
	AttemptNext     map[string][]string
	// PhaseRank, Live and AttemptTerminal are the attempt statuses'
	// predicates.
	PhaseRank       map[string]int
	Live            map[string]bool
	AttemptTerminal map[string]bool

	MaxAttemptsMin, MaxAttemptsMax, MaxAttemptsDefault int
	AdmissionWindowMin, AdmissionWindowMax             time.Duration

	// TokenBytes is protocol.CommitTokenBytes; Tokens are tokens drawn by
	// protocol.NewCommitToken from known bytes, with their stored hashes
	// and whether protocol verifies and accepts them.
	TokenBytes int
	Tokens     []TokenSample

	// ReadLimitBytes is the largest frame the gateway reads.
	ReadLimitBytes int

	ConflictReasons []string
	Codes           []string
	CreateJobFields []string
	Actors          []string
}

// TokenSample is one commit token drawn from known bytes.
type TokenSample struct {
	Entropy   []byte
	Plaintext string
	Hash      string
	// Verifies is protocol.VerifyCommitToken(Plaintext, Hash); ValidHash
	// is protocol.ValidTokenHash(Hash).
	Verifies, ValidHash bool
	Err                 error
}

// tokenSamples is how many tokens the check draws: enough bytes that every
// 6-bit group, and so every symbol of the encoding, comes up.
const tokenSamples = 16

// Protocol reads the tables of package protocol.
func Protocol() Tables {
	t := Tables{Retryable: map[string]bool{}, JobNext: map[string][]string{}, JobTerminal: map[string]bool{},
		AttemptNext: map[string][]string{}, PhaseRank: map[string]int{}, Live: map[string]bool{},
		AttemptTerminal: map[string]bool{},
		MaxAttemptsMin:  protocol.MaxAttemptsMin, MaxAttemptsMax: protocol.MaxAttemptsMax,
		MaxAttemptsDefault: protocol.MaxAttemptsDefault,
		AdmissionWindowMin: protocol.AdmissionWindowMin, AdmissionWindowMax: protocol.AdmissionWindowMax,
		TokenBytes: protocol.CommitTokenBytes, ReadLimitBytes: protocol.ReadLimitBytes, CreateJobFields: append([]string(nil), protocol.CreateJobFields...)}
	for _, c := range protocol.FailureCodes {
		t.FailureCodes = append(t.FailureCodes, string(c))
		t.Retryable[string(c)] = c.IsRetryable()
	}
	for _, from := range protocol.JobStatuses {
		t.JobStatuses = append(t.JobStatuses, string(from))
		t.JobTerminal[string(from)] = from.Terminal()
		for _, to := range protocol.JobStatuses {
			if protocol.AssertJobTransition(from, to) == nil {
				t.JobNext[string(from)] = append(t.JobNext[string(from)], string(to))
			}
		}
	}
	for _, from := range protocol.AttemptStatuses {
		s := string(from)
		t.AttemptStatuses = append(t.AttemptStatuses, s)
		t.PhaseRank[s], t.Live[s], t.AttemptTerminal[s] = protocol.PhaseRank(from), from.Live(), from.Terminal()
		for _, to := range protocol.AttemptStatuses {
			if protocol.AssertAttemptTransition(from, to) == nil {
				t.AttemptNext[s] = append(t.AttemptNext[s], string(to))
			}
		}
	}
	for _, c := range protocol.ControlPlaneCodes {
		t.ControlPlaneCodes = append(t.ControlPlaneCodes, string(c))
	}
	t.Tokens = drawTokens()
	for _, r := range []protocol.ConflictReason{protocol.ReasonIdentityMismatch, protocol.ReasonAttemptTerminal,
		protocol.ReasonLeaseExpired, protocol.ReasonJobCancelling, protocol.ReasonPhaseRegression} {
		t.ConflictReasons = append(t.ConflictReasons, string(r))
	}
	for _, c := range []protocol.Code{protocol.CodeCreated, protocol.CodeValidation, protocol.CodeInsufficientFunds,
		protocol.CodeIdempotencyConflict, protocol.CodeLeaseOffer, protocol.CodeNoJob, protocol.CodeNoSlot,
		protocol.CodeProgressOK, protocol.CodeLeaseConflict, protocol.CodeCommitPending, protocol.CodeCommitOK,
		protocol.CodeCommitConflict, protocol.CodeAttemptNotCommittable, protocol.CodeLeaseExpired,
		protocol.CodeJobCancelled, protocol.CodeVerificationFailed, protocol.CodeFailOK, protocol.CodeFailConflict,
		protocol.CodeBadFailureCode, protocol.CodeWithdrawn, protocol.CodeWithdrawConflict, protocol.CodeCancelled, protocol.CodeCancelling, protocol.CodeJobTerminal,
		protocol.CodeNotFound, protocol.CodeUploadOK, protocol.CodeOutputSealed} {
		t.Codes = append(t.Codes, string(c))
	}
	t.Codes = append(t.Codes, string(protocol.ReasonAttemptLost), string(protocol.FailAdmissionExpired),
		string(protocol.FailOfferWithdrawn))
	for _, a := range []protocol.Actor{protocol.ActorBuyer, protocol.ActorMatcher, protocol.ActorDevice,
		protocol.ActorVerify, protocol.ActorSweeper, protocol.ActorOperator} {
		t.Actors = append(t.Actors, string(a))
	}
	return t
}

// drawTokens draws tokenSamples tokens from the bytes 0, 1, ..., 255, 0, ...
// (each sample's entropy recorded, so the check can decode and compare).
func drawTokens() []TokenSample {
	src := &countingReader{}
	out := make([]TokenSample, 0, tokenSamples)
	for range tokenSamples {
		before := src.n
		plain, hash, err := protocol.NewCommitToken(src)
		s := TokenSample{Plaintext: plain, Hash: hash, Err: err}
		for i := before; i < src.n; i++ {
			s.Entropy = append(s.Entropy, byte(i))
		}
		s.Verifies, s.ValidHash = protocol.VerifyCommitToken(plain, hash), protocol.ValidTokenHash(hash)
		out = append(out, s)
	}
	return out
}

// countingReader yields the bytes 0, 1, 2, ... (mod 256) and counts them.
type countingReader struct{ n int }

func (r *countingReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r.n)
		r.n++
	}
	return len(p), nil
}
