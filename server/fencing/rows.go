package fencing

import (
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rendermac/rendermac/protocol"
)

// The row locks. Every transaction that touches a job locks the job row
// first and only then its attempt rows; see doc.go for why this order,
// together with Lease's device-first SKIP LOCKED scan, cannot deadlock.
const (
	sqlLockJob = `
SELECT id::text, buyer_id::text, service, status, max_attempts, attempt_count, withdrawn_count, admission_deadline
FROM jobs WHERE id = $1 FOR UPDATE`

	// The attempt is locked by its id and its job's id together, so a
	// transaction never locks an attempt of a job it has not locked.
	sqlLockAttempt = `
SELECT id::text, job_id::text, device_id::text, attempt_number, status, lease_epoch, commit_token_hash,
       lease_expires_at, coalesce(claimed_output_key, ''), coalesce(claimed_output_bytes, 0),
       coalesce(claimed_output_sha256, '')
FROM job_attempts WHERE id = $1 AND job_id = $2 FOR UPDATE`
)

// jobRow is the part of a locked jobs row the decisions read.
type jobRow struct {
	ID, BuyerID, Service string
	Status               protocol.JobStatus
	MaxAttempts          int
	AttemptCount         int
	// WithdrawnCount is how many of AttemptCount were withdrawn offers,
	// which spend none of MaxAttempts.
	WithdrawnCount    int
	AdmissionDeadline time.Time
}

// attemptRow is a locked job_attempts row.
type attemptRow struct {
	ID, JobID, DeviceID string
	Number              int
	Status              protocol.AttemptStatus
	LeaseEpoch          int
	TokenHash           string
	LeaseExpiresAt      time.Time
	Claimed             protocol.Output
}

// optionalRow scans a batch's row that may be missing into dest: a row sets
// *found, no row leaves it false and is not an error, and any other error is
// wrapped with what.
func optionalRow(found *bool, what string, dest ...any) func(pgx.Row) error {
	return func(r pgx.Row) error {
		err := r.Scan(dest...)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		*found = true
		return nil
	}
}

func scanJob(row pgx.Row, id string, j *jobRow) (bool, error) {
	err := row.Scan(&j.ID, &j.BuyerID, &j.Service, &j.Status, &j.MaxAttempts, &j.AttemptCount, &j.WithdrawnCount,
		&j.AdmissionDeadline)
	if errors.Is(err, pgx.ErrNoRows) {
		*j = jobRow{}
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("lock job %s: %w", id, err)
	}
	j.AdmissionDeadline = j.AdmissionDeadline.UTC()
	return true, nil
}

func scanAttempt(row pgx.Row, id string, a *attemptRow) (bool, error) {
	err := row.Scan(&a.ID, &a.JobID, &a.DeviceID, &a.Number, &a.Status, &a.LeaseEpoch, &a.TokenHash, &a.LeaseExpiresAt,
		&a.Claimed.Key, &a.Claimed.Bytes, &a.Claimed.SHA256)
	if errors.Is(err, pgx.ErrNoRows) {
		*a = attemptRow{}
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("lock attempt %s: %w", id, err)
	}
	a.LeaseExpiresAt = a.LeaseExpiresAt.UTC()
	return true, nil
}

// jobAttemptLock is a job and then one of its attempts locked in a
// pipelined transaction (Service.pipelined), the order every agent-facing
// operation uses: queue puts both locks, the job's first, behind the
// batch's BEGIN; once the batch is sent, result returns them. Ids that are
// not canonical lowercase uuids name nothing, exactly as in the model's
// string-keyed maps, and are never sent to Postgres (which would accept
// other spellings of the same uuid). The attempt is locked by its id and
// the presented job id, which is the locked job's id when that exists (ids
// are canonical) and matches no attempt when it does not, so a transaction
// never locks an attempt of a job it has not locked.
type jobAttemptLock struct {
	j            jobRow
	a            attemptRow
	jobOK, attOK bool
}

func (l *jobAttemptLock) queue(b *pgx.Batch, jobID, attemptID string) {
	*l = jobAttemptLock{}
	if !protocol.ValidID(jobID) {
		return
	}
	b.Queue(sqlLockJob, jobID).QueryRow(func(r pgx.Row) (err error) {
		l.jobOK, err = scanJob(r, jobID, &l.j)
		return err
	})
	if !protocol.ValidID(attemptID) {
		return
	}
	b.Queue(sqlLockAttempt, attemptID, jobID).QueryRow(func(r pgx.Row) (err error) {
		l.attOK, err = scanAttempt(r, attemptID, &l.a)
		return err
	})
}

// lockedJob is the locked job; ok is false when it is missing. A lock
// queued with no attempt id locks the job alone.
func (l *jobAttemptLock) lockedJob() (jobRow, bool) { return l.j, l.jobOK }

// result is the locked job and attempt; ok is false when either is missing.
func (l *jobAttemptLock) result() (jobRow, attemptRow, bool) {
	if !l.jobOK {
		return l.j, attemptRow{}, false
	}
	return l.j, l.a, l.attOK
}

// fence is the device and lease epoch an attempt write is guarded by, next
// to the attempt's id, its job's id and the status it was locked in. For a
// device's write they are what the device presented (and the check
// accepted). A write whose WHERE clause matches no row is an internal error:
// the locks make it impossible.
type fence struct {
	DeviceID   string
	LeaseEpoch int
}

// rowFence is the fence of an attempt as stored, for writers that do not
// act for a device (verifier, sweeper).
func rowFence(a attemptRow) fence { return fence{DeviceID: a.DeviceID, LeaseEpoch: a.LeaseEpoch} }
