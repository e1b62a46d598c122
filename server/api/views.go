package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/protocol/buyer"
	"github.com/rendermac/rendermac/server/grant"
)

// Page sizes of GET /v1/jobs and GET /v1/jobs/{id}/events (limit=).
const (
	defaultListLimit = 100
	maxListLimit     = 500
)

const (
	jobColumns = `
j.id::text, j.status, j.service, j.params, j.input_bytes, j.input_sha256, j.max_attempts, j.attempt_count,
coalesce(j.failure_code, ''), j.created_at, j.admission_deadline, j.updated_at`

	// Every job read is scoped by buyer: that is the whole tenancy rule.
	sqlJob = `SELECT ` + jobColumns + `, coalesce(j.output_key, ''), coalesce(j.output_bytes, 0),
coalesce(j.output_sha256, '') FROM jobs j WHERE j.id = $1 AND j.buyer_id = $2`

	// A page of a buyer's jobs, newest first (jobs_buyer_idx read
	// backwards): sqlListJobs is the first, sqlListJobsAfter the jobs
	// strictly after the cursor's (created_at, id). Two statements, not
	// one with "$4 IS NULL OR ...": under the generic plan a prepared
	// statement gets after five runs, that OR kept the row comparison out
	// of the index condition, and a page N jobs deep read the N jobs before
	// it (rendermac bench --history: 17 ms 6,000 jobs deep on a loaded
	// machine, growing with depth); as an index condition a deep page
	// costs what the first does.
	sqlListJobsWhere = `SELECT ` + jobColumns + ` FROM jobs j
WHERE j.buyer_id = $1 AND ($2 = '' OR j.status = $2)`
	sqlListJobsOrder = `
ORDER BY j.created_at DESC, j.id DESC LIMIT $3`
	sqlListJobs      = sqlListJobsWhere + sqlListJobsOrder
	sqlListJobsAfter = sqlListJobsWhere + `
  AND (j.created_at, j.id) < ($4::timestamptz, $5::uuid)` + sqlListJobsOrder

	sqlAttempts = `
SELECT id::text, attempt_number, status, device_id::text, lease_epoch, lease_expires_at,
       coalesce(failure_code, ''), created_at, ended_at, coalesce(encoder, ''), coalesce(verify_message, ''),
       coalesce(failure_message, '')
FROM job_attempts WHERE job_id = $1 ORDER BY attempt_number`

	sqlOwnsJob = `SELECT true FROM jobs WHERE id = $1 AND buyer_id = $2`

	// A keyset page of the journal: rows after seq $2, in append order.
	sqlEvents = `
SELECT id, kind, coalesce(attempt_id::text, ''), coalesce(from_status, ''), to_status, code, actor, at
FROM job_events WHERE job_id = $1 AND id > $2 ORDER BY id LIMIT $3`
)

// errNoJob means the job is missing or another buyer's.
var errNoJob = errors.New("no such job")

func scanJob(row pgx.Row, extra ...any) (buyer.Job, error) {
	var j buyer.Job
	err := row.Scan(append([]any{&j.ID, &j.Status, &j.Service, &j.Params, &j.Input.Bytes, &j.Input.SHA256,
		&j.MaxAttempts, &j.AttemptCount, &j.FailureCode, &j.CreatedAt, &j.AdmissionDeadline, &j.UpdatedAt}, extra...)...)
	if j.Params == nil {
		j.Params = map[string]string{}
	}
	j.CreatedAt, j.AdmissionDeadline, j.UpdatedAt = j.CreatedAt.UTC(), j.AdmissionDeadline.UTC(), j.UpdatedAt.UTC()
	return j, err
}

// readTx runs fn in a read-only REPEATABLE READ transaction: one snapshot,
// so a job and its attempts (or its journal) agree with each other.
func (a *API) readTx(ctx context.Context, fn func(pgx.Tx) error) error {
	return pgx.BeginTxFunc(ctx, a.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, fn)
}

// loadJob reads one of the buyer's jobs with its attempts. Ids that are
// not canonical uuids name no job and never reach Postgres.
func (a *API) loadJob(ctx context.Context, buyerID, id string) (buyer.JobDetail, error) {
	var d buyer.JobDetail
	if !protocol.ValidID(id) {
		return d, errNoJob
	}
	var out buyer.Output
	err := a.readTx(ctx, func(tx pgx.Tx) error {
		var err error
		d.Job, err = scanJob(tx.QueryRow(ctx, sqlJob, id, buyerID), &out.Key, &out.Bytes, &out.SHA256)
		if errors.Is(err, pgx.ErrNoRows) {
			return errNoJob
		}
		if err != nil {
			return fmt.Errorf("read job %s: %w", id, err)
		}
		rows, err := tx.Query(ctx, sqlAttempts, id)
		if err == nil {
			d.Attempts, err = pgx.CollectRows(rows, scanAttempt)
		}
		if err != nil {
			return fmt.Errorf("read attempts of %s: %w", id, err)
		}
		return nil
	})
	if err != nil || d.Status != protocol.JobSucceeded {
		return d, err
	}
	now, err := a.now(ctx)
	if err != nil {
		return d, err
	}
	// The key was validated when the attempt's grants were made and the
	// output verified at it, so it is a valid artifact key here.
	if out.DownloadURL, err = a.cfg.Grants.Grant(ctx, grant.Get, out.Key, now, a.cfg.DownloadTTL); err != nil {
		return d, fmt.Errorf("download grant of %s: %w", id, err)
	}
	d.Output = &out
	return d, nil
}

func scanAttempt(row pgx.CollectableRow) (buyer.Attempt, error) {
	var at buyer.Attempt
	err := row.Scan(&at.ID, &at.Number, &at.Status, &at.DeviceID, &at.LeaseEpoch, &at.LeaseExpiresAt,
		&at.FailureCode, &at.StartedAt, &at.EndedAt, &at.Encoder, &at.VerifyMessage,
		&at.FailureMessage)
	at.LeaseExpiresAt, at.StartedAt = at.LeaseExpiresAt.UTC(), at.StartedAt.UTC()
	if at.EndedAt != nil {
		t := at.EndedAt.UTC()
		at.EndedAt = &t
	}
	return at, err
}

// writeJob answers status with the buyer's job, after a write that the
// job's id came from.
func (a *API) writeJob(w http.ResponseWriter, r *http.Request, status int, buyerID, id string) {
	d, err := a.loadJob(r.Context(), buyerID, id)
	switch {
	case errors.Is(err, errNoJob):
		jobNotFound(w)
	case err != nil:
		a.internal(w, r, err)
	default:
		writeJSON(w, status, d)
	}
}

// getJob is GET /v1/jobs/{id}.
func (a *API) getJob(w http.ResponseWriter, r *http.Request, buyerID string) {
	a.writeJob(w, r, http.StatusOK, buyerID, r.PathValue("id"))
}

// pageLimit reads limit= (default defaultListLimit, 1..maxListLimit).
func pageLimit(r *http.Request) (int, *requestError) {
	s := r.URL.Query().Get("limit")
	if s == "" {
		return defaultListLimit, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > maxListLimit {
		return 0, invalid("limit", "limit must be 1..%d", maxListLimit)
	}
	return n, nil
}

// listJobs is GET /v1/jobs?status=&limit=&cursor=: the buyer's jobs,
// newest first, one keyset page at a time (see cursor.go). Every job that
// exists when the first page is read appears exactly once across the
// pages, whatever is inserted meanwhile; with a status filter, a job whose
// status changes between pages may leave or enter the listing.
func (a *API) listJobs(w http.ResponseWriter, r *http.Request, buyerID string) {
	q := r.URL.Query()
	status := q.Get("status")
	if status != "" && !protocol.JobStatus(status).Valid() {
		invalid("status", "status %q is not a job status", status).write(w)
		return
	}
	limit, rerr := pageLimit(r)
	if rerr != nil {
		rerr.write(w)
		return
	}
	sql, args := sqlListJobs, []any{buyerID, status, limit + 1}
	if c := q.Get("cursor"); c != "" {
		p, err := a.parseJobsCursor(buyerID, status, c)
		if err != nil {
			badCursor().write(w)
			return
		}
		sql, args = sqlListJobsAfter, append(args, p.createdAt, p.id)
	}
	var jobs []buyer.Job
	err := a.readTx(r.Context(), func(tx pgx.Tx) error {
		rows, err := tx.Query(r.Context(), sql, args...)
		if err != nil {
			return err
		}
		jobs, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (buyer.Job, error) { return scanJob(row) })
		return err
	})
	if err != nil {
		a.internal(w, r, fmt.Errorf("list jobs: %w", err))
		return
	}
	page := buyer.JobsPage{Jobs: jobs}
	if len(jobs) > limit {
		page.Jobs = jobs[:limit]
		last := page.Jobs[limit-1]
		page.NextCursor = a.jobsCursor(buyerID, status, jobsPosition{createdAt: last.CreatedAt, id: last.ID})
	}
	if page.Jobs == nil {
		page.Jobs = []buyer.Job{}
	}
	writeJSON(w, http.StatusOK, page)
}

// jobEvents is GET /v1/jobs/{id}/events?limit=&cursor=: the job's journal
// in append order, one keyset page at a time. A job's journal rows are
// appended only by transactions holding the job's row lock, so their seqs
// grow in commit order: following next_cursor sees every event once.
func (a *API) jobEvents(w http.ResponseWriter, r *http.Request, buyerID string) {
	id := r.PathValue("id")
	if !protocol.ValidID(id) {
		jobNotFound(w)
		return
	}
	limit, rerr := pageLimit(r)
	if rerr != nil {
		rerr.write(w)
		return
	}
	var after int64
	if c := r.URL.Query().Get("cursor"); c != "" {
		seq, err := a.parseEventsCursor(buyerID, id, c)
		if err != nil {
			badCursor().write(w)
			return
		}
		after = seq
	}
	var events []buyer.Event
	err := a.readTx(r.Context(), func(tx pgx.Tx) error {
		var owns bool
		err := tx.QueryRow(r.Context(), sqlOwnsJob, id, buyerID).Scan(&owns)
		if errors.Is(err, pgx.ErrNoRows) {
			return errNoJob
		}
		if err != nil {
			return err
		}
		rows, err := tx.Query(r.Context(), sqlEvents, id, after, limit+1)
		if err != nil {
			return err
		}
		events, err = pgx.CollectRows(rows, scanEvent)
		return err
	})
	switch {
	case errors.Is(err, errNoJob):
		jobNotFound(w)
	case err != nil:
		a.internal(w, r, fmt.Errorf("read events of %s: %w", id, err))
	default:
		page := buyer.EventsPage{Events: events, HasMore: len(events) > limit}
		if page.HasMore {
			page.Events = events[:limit]
		}
		if n := len(page.Events); n > 0 {
			after = page.Events[n-1].Seq
		}
		if page.Events == nil {
			page.Events = []buyer.Event{}
		}
		page.NextCursor = a.eventsCursor(buyerID, id, after)
		writeJSON(w, http.StatusOK, page)
	}
}

func scanEvent(row pgx.CollectableRow) (buyer.Event, error) {
	var e buyer.Event
	err := row.Scan(&e.Seq, &e.Kind, &e.AttemptID, &e.FromStatus, &e.ToStatus, &e.Code, &e.Actor, &e.At)
	e.At = e.At.UTC()
	return e, err
}
