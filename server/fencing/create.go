package fencing

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/faultpoint"
)

const (
	// The buyer row is locked first: it serialises one buyer's creates, so
	// the idempotency lookup and the balance check cannot race a concurrent
	// create with the same key.
	sqlLockBuyer = `SELECT balance_cents FROM buyers WHERE id = $1 FOR UPDATE`

	sqlFindIdempotent = `
SELECT id::text, request_fingerprint FROM jobs WHERE buyer_id = $1 AND idempotency_key = $2`

	sqlInsertJob = `
INSERT INTO jobs (id, buyer_id, service, params, input_bytes, input_sha256, max_attempts, attempt_count,
                  status, idempotency_key, request_fingerprint, created_at, admission_deadline, updated_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, 0, 'queued', nullif($8, ''), $9, $10, $11, $10)`

	sqlInsertHold = `
INSERT INTO holds (job_id, buyer_id, amount_cents, status, created_at) VALUES ($1, $2, $3, 'held', $4)`

	sqlDebitBuyer = `
UPDATE buyers SET balance_cents = balance_cents - $2 WHERE id = $1 AND balance_cents >= $2`
)

// Limits of CreateJob's validation (docs/semantics.md, CreateJob step 1).
const (
	maxParams              = 32
	maxParamValueBytes     = 256
	maxIdempotencyKeyBytes = 200
)

var paramKey = regexp.MustCompile(`^[a-z0-9_]{1,32}$`)

// CreateJob places a buyer's order: validation, idempotency, funds, then the
// job, its hold and its journal row in one transaction. A job id is drawn
// from the IDSource only when the job row is inserted. Its round trips:
// BEGIN with the buyer's lock and the Idempotency-Key lookup; the job's
// writes with COMMIT. The buyer's lock, which this buyer's other creates
// and hold settlements wait for, is held across the last one only.
func (s *Service) CreateJob(ctx context.Context, now time.Time, req protocol.CreateJobRequest) (protocol.Reply, error) {
	return s.CreateJobWithInput(ctx, now, req, nil)
}

// CreateJobWithInput is CreateJob that also runs beforeCommit inside the
// creating transaction, after the new job's id is drawn and its row written,
// and only on the path that creates a job. The API stores the job's input at
// inputs/{job_id} there, so no device can lease a job whose input is not yet
// stored; if beforeCommit fails, nothing is written. beforeCommit may run
// more than once with the same id when the transaction is retried.
func (s *Service) CreateJobWithInput(ctx context.Context, now time.Time, req protocol.CreateJobRequest,
	beforeCommit func(ctx context.Context, jobID string) error) (protocol.Reply, error) {
	field := s.invalidField(req)
	fingerprint, err := requestFingerprint(req)
	if err != nil {
		return protocol.Reply{}, err
	}
	d := draws{ids: s.ids}
	var r protocol.Reply
	var buyer createBuyer
	err = s.pipelined(ctx, OpCreateJob, now, protocol.ActorBuyer, func(b *pgx.Batch) { buyer.queue(b, req, field) },
		func(ctx context.Context, st *step) error {
			var err error
			r, err = s.createJob(ctx, st, req, field, fingerprint, &buyer, &d)
			if err != nil || beforeCommit == nil || r.Code != protocol.CodeCreated || r.Existing {
				return err
			}
			// The job's rows go out first: an input is stored only for a
			// job the database accepted.
			if err = st.flush(ctx); err != nil {
				return err
			}
			if err = beforeCommit(ctx, r.JobID); err != nil {
				return fmt.Errorf("create job %s: before commit: %w", r.JobID, err)
			}
			return nil
		})
	return r, err
}

// createBuyer is what CreateJob reads first, in the round trip of BEGIN:
// the buyer's row, locked, and then the job created earlier with the
// request's Idempotency-Key. The lookup is the pipeline's next statement,
// so it runs under a snapshot taken after the lock is held and sees any
// create of this buyer that held the lock before. It is sent only for a
// valid request, so no unvalidated text reaches the database.
type createBuyer struct {
	found               bool
	balance             int64
	existing            bool
	existingID          string
	existingFingerprint string
}

func (cb *createBuyer) queue(b *pgx.Batch, req protocol.CreateJobRequest, field string) {
	*cb = createBuyer{}
	if !protocol.ValidID(req.BuyerID) {
		return
	}
	b.Queue(sqlLockBuyer, req.BuyerID).QueryRow(optionalRow(&cb.found, "lock buyer", &cb.balance))
	if field != "" || req.IdempotencyKey == "" {
		return
	}
	b.Queue(sqlFindIdempotent, req.BuyerID, req.IdempotencyKey).QueryRow(
		optionalRow(&cb.existing, "find idempotent job", &cb.existingID, &cb.existingFingerprint))
}

func (s *Service) createJob(ctx context.Context, st *step, req protocol.CreateJobRequest, field, fingerprint string,
	buyer *createBuyer, d *draws) (protocol.Reply, error) {
	if !buyer.found {
		return protocol.Reply{Code: protocol.CodeNotFound, Field: "buyer"}, nil
	}
	if field != "" {
		return protocol.Reply{Code: protocol.CodeValidation, Field: field}, nil
	}
	switch {
	case buyer.existing && buyer.existingFingerprint == fingerprint:
		return protocol.Reply{Code: protocol.CodeCreated, JobID: buyer.existingID, Existing: true}, nil
	case buyer.existing:
		return protocol.Reply{Code: protocol.CodeIdempotencyConflict}, nil
	}
	svc, _ := s.service(req.Service)
	if svc.PriceCents > buyer.balance {
		return protocol.Reply{Code: protocol.CodeInsufficientFunds}, nil
	}
	s.cfg.FaultPoints.Hit(ctx, faultpoint.CreateBeforeInsert) // the buyer's row lock is held
	jobID := d.jobID()
	if err := insertJob(ctx, st, jobID, req, fingerprint, svc.PriceCents); err != nil {
		return protocol.Reply{}, err
	}
	return protocol.Reply{Code: protocol.CodeCreated, JobID: jobID}, nil
}

// insertJob writes the queued job, its held hold, the debit and the journal row.
func insertJob(ctx context.Context, st *step, jobID string, req protocol.CreateJobRequest, fingerprint string, price int64) error {
	params := req.Params
	if params == nil {
		params = map[string]string{}
	}
	deadline := at(st.now, req.AdmissionWindow)
	if err := st.write(ctx, "insert job", false, sqlInsertJob, jobID, req.BuyerID, req.Service, params, req.Input.Bytes,
		req.Input.SHA256, req.MaxAttempts, req.IdempotencyKey, fingerprint, st.now, deadline); err != nil {
		return err
	}
	if err := st.write(ctx, "insert hold", false, sqlInsertHold, jobID, req.BuyerID, price, st.now); err != nil {
		return err
	}
	if err := st.write(ctx, "debit buyer "+req.BuyerID, true, sqlDebitBuyer, req.BuyerID, price); err != nil {
		return err
	}
	if err := st.journal(ctx, jobID, "", "", string(protocol.JobQueued), ""); err != nil {
		return err
	}
	return st.notifyJobs(ctx, req.Service)
}

// invalidField is CreateJob's validation after the buyer lookup, in the
// documented order; "" means the request is valid.
func (s *Service) invalidField(req protocol.CreateJobRequest) string {
	svc, ok := s.service(req.Service)
	if !ok {
		return "service"
	}
	if req.MaxAttempts < protocol.MaxAttemptsMin || req.MaxAttempts > protocol.MaxAttemptsMax {
		return "max_attempts"
	}
	if req.AdmissionWindow < protocol.AdmissionWindowMin || req.AdmissionWindow > protocol.AdmissionWindowMax {
		return "admission_window"
	}
	if req.Input.Bytes < 0 {
		return "input.bytes"
	}
	if !protocol.ValidTokenHash(req.Input.SHA256) { // the same 64-lowercase-hex form
		return "input.sha256"
	}
	if len(req.Params) > maxParams {
		return "params"
	}
	for k, v := range req.Params {
		if !paramKey.MatchString(k) || len(v) > maxParamValueBytes || !protocol.ValidText(v) {
			return "params"
		}
		// A param must be one the service declares, and fit its type and
		// bounds.
		if spec, declared := svc.Param(k); !declared || !spec.Accepts(v) {
			return "params"
		}
	}
	if len(req.IdempotencyKey) > maxIdempotencyKeyBytes || !protocol.ValidText(req.IdempotencyKey) {
		return "idempotency_key"
	}
	return ""
}

// requestFingerprint is the lowercase hex SHA-256 of the request's JSON
// (service, params, input, max_attempts: the fields CreateJobRequest
// serialises, map keys sorted) immediately followed by the admission window
// in whole milliseconds. The JSON ends in '}', so the concatenation is
// unambiguous. Two requests with the same key are "the same request" exactly
// when these agree.
func requestFingerprint(req protocol.CreateJobRequest) (string, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return "", fmt.Errorf("fingerprint request: %w", err)
	}
	body = strconv.AppendInt(body, req.AdmissionWindow.Milliseconds(), 10)
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:]), nil
}
