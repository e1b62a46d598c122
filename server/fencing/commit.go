package fencing

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/rendermac/rendermac/internal/dbstat"
	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/artifact"
	"github.com/rendermac/rendermac/server/faultpoint"
	"github.com/rendermac/rendermac/server/probe"
)

const (
	// sqlBeginCommit is transaction 1's write: uploading -> committing with
	// the claimed output, and the lease renewed as the verification deadline.
	sqlBeginCommit = `
UPDATE job_attempts SET status = 'committing', claimed_output_key = $5, claimed_output_bytes = $6,
       claimed_output_sha256 = $7, lease_expires_at = $8
WHERE id = $1 AND job_id = $2 AND device_id = $3 AND lease_epoch = $4 AND status = 'uploading'`

	// sqlClaimedOutput reads what transaction 1 recorded, for verification
	// outside any transaction.
	sqlClaimedOutput = `
SELECT a.status, coalesce(a.claimed_output_key, ''), coalesce(a.claimed_output_bytes, 0),
       coalesce(a.claimed_output_sha256, ''), j.service
FROM job_attempts a JOIN jobs j ON j.id = a.job_id WHERE a.id = $1 AND a.job_id = $2`
)

// CommitBegin is commit transaction 1. It locks the job (by c.JobID), then
// the attempt, checks identity and token, and either finalizes a pending
// cancellation (job_cancelled) or moves the attempt to committing and the
// job to verifying (commit_pending). A repeated commit of a committing
// attempt changes nothing and is commit_pending again.
func (s *Service) CommitBegin(ctx context.Context, now time.Time, deviceID string, c protocol.Commit) (protocol.Reply, error) {
	r, _, err := s.commitBeginClaim(ctx, now, deviceID, c)
	return r, err
}

// claim is what verification checks, as transaction 1 saw it: the job's
// service and the output claimed for the committing attempt.
type claim struct {
	service string
	output  protocol.Output
}

// commitBeginClaim is CommitBegin, also returning, with commit_pending,
// the claim it recorded (or, for a repeated commit, found recorded), so
// that Commit verifies without reading it back.
func (s *Service) commitBeginClaim(ctx context.Context, now time.Time, deviceID string, c protocol.Commit) (protocol.Reply, claim, error) {
	s.cfg.FaultPoints.Hit(ctx, faultpoint.CommitBeforeTx1)
	var r protocol.Reply
	var cl claim
	var l jobAttemptLock
	err := s.pipelined(ctx, OpCommitBegin, now, protocol.ActorDevice, func(b *pgx.Batch) { l.queue(b, c.JobID, c.AttemptID) },
		func(ctx context.Context, st *step) error {
			var err error
			r, cl, err = s.commitBegin(ctx, st, deviceID, c, &l)
			return err
		})
	s.cfg.FaultPoints.Hit(ctx, faultpoint.CommitAfterTx1)
	return r, cl, err
}

func (s *Service) commitBegin(ctx context.Context, st *step, deviceID string, c protocol.Commit, l *jobAttemptLock) (protocol.Reply, claim, error) {
	r, err := s.commitBeginReply(ctx, st, deviceID, c, l)
	if err != nil || r.Code != protocol.CodeCommitPending {
		return r, claim{}, err
	}
	j, a, _ := l.result()
	if a.Status == protocol.AttemptCommitting { // a repeated commit
		return r, claim{service: j.Service, output: a.Claimed}, nil
	}
	return r, claim{service: j.Service, output: c.Output}, nil
}

func (s *Service) commitBeginReply(ctx context.Context, st *step, deviceID string, c protocol.Commit, l *jobAttemptLock) (protocol.Reply, error) {
	j, a, ok := l.result()
	f, ok := s.authorize(ok, a, deviceID, c.LeaseEpoch, c.CommitToken, s.v.noEpochCheck())
	switch {
	case !ok:
		return protocol.Reply{Code: protocol.CodeCommitConflict}, nil
	case a.Status != protocol.AttemptUploading && a.Status != protocol.AttemptCommitting && !s.v.commitIgnoresAttemptStatus():
		return protocol.Reply{Code: protocol.CodeAttemptNotCommittable, Status: a.Status}, nil
	case a.Status == protocol.AttemptCommitting && s.v.commitNotIdempotent():
		return protocol.Reply{Code: protocol.CodeAttemptNotCommittable, Status: a.Status}, nil
	case a.Status == protocol.AttemptUploading && !st.now.Before(a.LeaseExpiresAt):
		return protocol.Reply{Code: protocol.CodeLeaseExpired}, nil
	}
	// Past the refusals the commit is accepted: a heartbeat of the device.
	if err := st.heartbeat(ctx, deviceID); err != nil {
		return protocol.Reply{}, err
	}
	switch {
	case j.Status == protocol.JobCancelling && !s.v.commitTx1IgnoresCancelling():
		return protocol.Reply{Code: protocol.CodeJobCancelled}, st.cancelBoth(ctx, &j, &a, f)
	case a.Status == protocol.AttemptCommitting:
		return protocol.Reply{Code: protocol.CodeCommitPending}, nil
	}
	if err := protocol.AssertAttemptTransition(a.Status, protocol.AttemptCommitting); err != nil {
		return protocol.Reply{}, internalf("attempt %s: %v", a.ID, err)
	}
	if err := st.write(ctx, "begin commit of "+a.ID, true, sqlBeginCommit, a.ID, a.JobID, f.DeviceID, f.LeaseEpoch,
		c.Output.Key, c.Output.Bytes, c.Output.SHA256, at(st.now, s.cfg.LeaseTTL)); err != nil {
		return protocol.Reply{}, err
	}
	if err := st.journal(ctx, a.JobID, a.ID, string(a.Status), string(protocol.AttemptCommitting), ""); err != nil {
		return protocol.Reply{}, err
	}
	if err := st.moveJob(ctx, &j, protocol.JobVerifying, ""); err != nil {
		return protocol.Reply{}, err
	}
	return protocol.Reply{Code: protocol.CodeCommitPending}, nil
}

// authorize is the identity and token check that commit and fail share:
// the attempt exists under the presented job, on the presented device, at
// the presented epoch, and the token hashes to its stored hash (compared in
// constant time, after the row is locked). It returns the fence the
// following writes are guarded by. ignoreEpoch, like every s.v hook, is
// the constant false outside a -tags mutations build.
func (s *Service) authorize(found bool, a attemptRow, deviceID string, epoch int, token string, ignoreEpoch bool) (fence, bool) {
	f := fence{DeviceID: deviceID, LeaseEpoch: epoch}
	if ignoreEpoch {
		f.LeaseEpoch = a.LeaseEpoch
	}
	tokenOK := protocol.VerifyCommitToken(token, a.TokenHash) || s.v.noTokenCheck()
	return f, found && a.DeviceID == f.DeviceID && a.LeaseEpoch == f.LeaseEpoch && tokenOK
}

// Verify checks, outside any transaction, the output transaction 1 recorded
// for the attempt: the claimed key is the attempt's own key, and the object
// there has the claimed size and SHA-256 and passes the service's media
// check. ok is false for any verification failure, and also when the
// attempt is not committing (transaction 2 then decides from its status).
// err is only for store I/O trouble: the attempt stays committing and the
// sweeper verifies again later.
func (s *Service) Verify(ctx context.Context, jobID, attemptID string) (ok bool, err error) {
	v, err := s.VerifyVerdict(ctx, jobID, attemptID)
	return v.OK, err
}

// VerifyVerdict is Verify with the verdict's reason and the encoder
// ffprobe found, for CommitFinishVerdict to record.
func (s *Service) VerifyVerdict(ctx context.Context, jobID, attemptID string) (Verdict, error) {
	if !protocol.ValidID(jobID) || !protocol.ValidID(attemptID) {
		return Verdict{}, nil
	}
	var status protocol.AttemptStatus
	var claimed protocol.Output
	var service string
	err := s.pool.QueryRow(dbstat.WithOp(ctx, OpVerifyRead), sqlClaimedOutput, attemptID, jobID).Scan(&status, &claimed.Key, &claimed.Bytes,
		&claimed.SHA256, &service)
	if errors.Is(err, pgx.ErrNoRows) {
		return Verdict{}, nil
	}
	if err != nil {
		return Verdict{}, fmt.Errorf("verify %s: read claim: %w", attemptID, err)
	}
	return s.verdict(ctx, jobID, attemptID, status, claim{service: service, output: claimed})
}

// verifyClaim is Verify of a claim in hand, of an attempt in status (Commit
// passes committing: transaction 1 just saw it so).
func (s *Service) verifyClaim(ctx context.Context, jobID, attemptID string, status protocol.AttemptStatus, cl claim) (ok bool, err error) {
	v, err := s.verdict(ctx, jobID, attemptID, status, cl)
	return v.OK, err
}

// Verdict is verification's outcome for one attempt.
type Verdict struct {
	OK bool
	// Message says why not OK (e.g. "codec: want h264, got hevc"); "" for
	// a claim that is not the attempt's own.
	Message string
	// Encoder is the encoder the output's video stream names (ffprobe's
	// encoder tag), when the service's profile ran ffprobe.
	Encoder string
}

// verdict is verifyClaim with the reason and what ffprobe saw.
func (s *Service) verdict(ctx context.Context, jobID, attemptID string, status protocol.AttemptStatus, cl claim) (v Verdict, err error) {
	key, claimed := protocol.OutputKey(jobID, attemptID), cl.output
	if status != protocol.AttemptCommitting || claimed.Key != key {
		return v, nil
	}
	svc, known := s.service(cl.service)
	if !known {
		return v, fmt.Errorf("verify %s: service %q is not in the catalogue", attemptID, cl.service)
	}
	s.cfg.FaultPoints.Hit(ctx, faultpoint.CommitDuringVerify)
	var check artifact.Probe
	if s.cfg.Prober != nil && svc.Verify.Probes() {
		want, err := s.expectation(ctx, jobID, svc)
		if err != nil {
			return v, fmt.Errorf("verify %s: %w", attemptID, err)
		}
		check = func(ctx context.Context, path string) error {
			got, err := s.cfg.Prober.Probe(ctx, path)
			if errors.Is(err, probe.ErrUnreadable) {
				return fmt.Errorf("%w: %v", artifact.ErrProbeVerdict, err)
			}
			if err != nil {
				return err
			}
			v.Encoder = got.Encoder()
			if err := probe.Check(svc.Verify, got, want); err != nil {
				return fmt.Errorf("%w: %v", artifact.ErrProbeVerdict, err)
			}
			return nil
		}
	}
	err = s.verifyStored(ctx, key, check, claimed.Bytes, claimed.SHA256, svc.Media)
	var verdict *artifact.VerifyError
	if errors.As(err, &verdict) {
		return Verdict{Message: verdict.Reason + ": " + verdict.Message, Encoder: v.Encoder}, nil
	}
	if err != nil {
		return Verdict{}, fmt.Errorf("verify %s: %w", attemptID, err)
	}
	v.OK = true
	return v, nil
}

// verifyStored runs the store's checks of the claim, then check (nil:
// none) on the very bytes hashed.
func (s *Service) verifyStored(ctx context.Context, key string, check artifact.Probe, bytes int64, sha256, media string) error {
	return artifact.VerifyProbed(ctx, s.store, key, bytes, sha256, media, check)
}

// sqlJobMedia reads what a profile's duration check depends on.
const sqlJobMedia = `SELECT params, input_bytes FROM jobs WHERE id = $1`

// expectation is the duration the job fixes for svc's profile: the
// duration param's value (or its default) exactly when the job has no
// input, as an upper bound when it has one and set the param.
func (s *Service) expectation(ctx context.Context, jobID string, svc protocol.Service) (probe.Expect, error) {
	name := svc.Verify.DurationParam
	if name == "" {
		return probe.Expect{}, nil
	}
	var params map[string]string
	var inputBytes int64
	if err := s.pool.QueryRow(dbstat.WithOp(ctx, OpVerifyRead), sqlJobMedia, jobID).Scan(&params, &inputBytes); err != nil {
		return probe.Expect{}, fmt.Errorf("read job params: %w", err)
	}
	spec, _ := svc.Param(name)
	text, set := params[name]
	switch {
	case inputBytes > 0 && !set:
		return probe.Expect{}, nil
	case !set:
		text = spec.Default
	}
	d, err := strconv.ParseFloat(text, 64)
	if err != nil || d <= 0 {
		return probe.Expect{}, nil // no expectation the job can be held to
	}
	return probe.Expect{DurationS: d, AtMost: inputBytes > 0}, nil
}

// CommitFinish is commit transaction 2: it locks the job, then the attempt,
// and decides. A job cancelled during verification is cancelled
// (job_cancelled); a failed verification fails attempt and job, not
// retried (verification_failed); otherwise attempt and job succeed with the
// claimed output and the hold is captured (commit_ok).
func (s *Service) CommitFinish(ctx context.Context, now time.Time, jobID, attemptID string, verified bool) (protocol.Reply, error) {
	return s.commitFinish(ctx, now, jobID, attemptID, verified, protocol.ActorVerify, Verdict{})
}

// CommitFinishVerdict is CommitFinish that also records on the attempt the
// verdict's message (a failed verification's reason) and the encoder
// ffprobe found; a refused verification's message is the reply's.
func (s *Service) CommitFinishVerdict(ctx context.Context, now time.Time, jobID, attemptID string, v Verdict) (protocol.Reply, error) {
	return s.commitFinish(ctx, now, jobID, attemptID, v.OK, protocol.ActorVerify, v)
}

// commitFinish is transaction 2 for actor: the verifier after a commit, the
// sweeper after re-verifying an abandoned one.
// verified decides; verdict only says what to record.
func (s *Service) commitFinish(ctx context.Context, now time.Time, jobID, attemptID string, verified bool, actor protocol.Actor,
	verdict Verdict) (protocol.Reply, error) {
	s.cfg.FaultPoints.Hit(ctx, faultpoint.CommitBeforeTx2)
	var r protocol.Reply
	var l jobAttemptLock
	err := s.pipelined(ctx, OpCommitFinish, now, actor, func(b *pgx.Batch) { l.queue(b, jobID, attemptID) },
		func(ctx context.Context, st *step) error {
			var err error
			r, err = s.finish(ctx, st, verified, verdict, &l)
			return err
		})
	s.cfg.FaultPoints.Hit(ctx, faultpoint.CommitAfterTx2)
	return r, err
}

func (s *Service) finish(ctx context.Context, st *step, verified bool, verdict Verdict, l *jobAttemptLock) (protocol.Reply, error) {
	j, a, ok := l.result()
	switch {
	case !ok || a.Status != protocol.AttemptCommitting:
		return protocol.Reply{Code: protocol.CodeAttemptNotCommittable, Status: a.Status}, nil
	case j.Status == protocol.JobCancelling && !s.v.commitFromCancelling():
		return protocol.Reply{Code: protocol.CodeJobCancelled}, st.cancelBoth(ctx, &j, &a, rowFence(a))
	case !verified:
		if err := st.endAttempt(ctx, &a, rowFence(a), protocol.AttemptFailed, protocol.FailVerificationFailed); err != nil {
			return protocol.Reply{}, err
		}
		if err := st.recordVerdict(ctx, a.ID, verdict); err != nil {
			return protocol.Reply{}, err
		}
		return protocol.Reply{Code: protocol.CodeVerificationFailed, Message: verdict.Message},
			st.moveJob(ctx, &j, protocol.JobFailed, protocol.FailVerificationFailed)
	}
	if err := st.endAttempt(ctx, &a, rowFence(a), protocol.AttemptSucceeded, ""); err != nil {
		return protocol.Reply{}, err
	}
	if err := st.recordVerdict(ctx, a.ID, verdict); err != nil {
		return protocol.Reply{}, err
	}
	if err := st.succeedJob(ctx, &j, a); err != nil {
		return protocol.Reply{}, err
	}
	return protocol.Reply{Code: protocol.CodeCommitOK}, nil
}

// Commit runs a whole commit: transaction 1, verification outside any
// transaction, transaction 2. It returns transaction 1's reply when that is
// not commit_pending. A store I/O error during verification is returned as
// an error; the attempt stays committing and Sweep finishes it.
func (s *Service) Commit(ctx context.Context, now time.Time, deviceID string, c protocol.Commit) (protocol.Reply, error) {
	r, cl, err := s.commitBeginClaim(ctx, now, deviceID, c)
	if err != nil || r.Code != protocol.CodeCommitPending {
		return r, err
	}
	v, err := s.verdict(ctx, c.JobID, c.AttemptID, protocol.AttemptCommitting, cl)
	if err != nil {
		return protocol.Reply{}, err
	}
	return s.CommitFinishVerdict(ctx, now, c.JobID, c.AttemptID, v)
}

// sqlRecordVerdict keeps what verification found on the attempt: the
// encoder named in the output and a refusal's reason (both shown in the
// job's view; neither is part of the contract's state).
const sqlRecordVerdict = `UPDATE job_attempts SET encoder = $2, verify_message = $3 WHERE id = $1`

// Bounds of the recorded verdict (the columns' CHECKs).
const (
	encoderMaxBytes       = 64
	verifyMessageMaxBytes = 512
)

// recordVerdict writes v's encoder and message, when there are any.
func (st *step) recordVerdict(ctx context.Context, attemptID string, v Verdict) error {
	if v.Encoder == "" && v.Message == "" {
		return nil
	}
	return st.write(ctx, "record verdict "+attemptID, true, sqlRecordVerdict, attemptID,
		nullText(clipUTF8(v.Encoder, encoderMaxBytes)), nullText(clipUTF8(v.Message, verifyMessageMaxBytes)))
}

// nullText is NULL for "".
func nullText(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// clipUTF8 cuts s to at most n bytes without splitting a character, and
// drops what Postgres text cannot hold.
func clipUTF8(s string, n int) string {
	s = strings.ToValidUTF8(strings.ReplaceAll(s, "\x00", ""), "?")
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}
