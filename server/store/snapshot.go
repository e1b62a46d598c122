package store

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rendermac/rendermac/protocol"
)

// The projections of protocol/snapshot.go, one statement per slice. Ids are
// uuids, whose order in Postgres (bytewise) equals the string order of their
// canonical lowercase form, which is the order the model sorts by.
const (
	sqlSnapshotJobs = `
SELECT j.id::text, j.buyer_id::text, j.service, j.status, coalesce(j.failure_code, ''),
       j.max_attempts, j.attempt_count, j.withdrawn_count, j.created_at, j.admission_deadline,
       coalesce(h.status, ''), coalesce(h.amount_cents, 0),
       (SELECT count(*) FROM webhook_outbox w WHERE w.job_id = j.id),
       coalesce(j.output_sha256, ''), coalesce(j.succeeded_attempt_id::text, '')
FROM jobs j LEFT JOIN holds h ON h.job_id = j.id
ORDER BY j.created_at, j.id`

	sqlSnapshotAttempts = `
SELECT a.id::text, a.job_id::text, a.device_id::text, a.attempt_number, a.status, a.lease_epoch,
       a.lease_expires_at, a.commit_token_hash, coalesce(a.failure_code, '')
FROM job_attempts a JOIN jobs j ON j.id = a.job_id
ORDER BY j.created_at, j.id, a.attempt_number`

	sqlSnapshotBuyers = `
SELECT b.id::text, b.balance_cents,
       coalesce((SELECT sum(h.amount_cents) FROM holds h WHERE h.buyer_id = b.id AND h.status = 'held'), 0)::bigint,
       b.captured_cents
FROM buyers b ORDER BY b.id`

	sqlSnapshotDevices = `
SELECT d.id::text, d.status,
       (SELECT count(*) FROM job_attempts a WHERE a.device_id = d.id
          AND a.` + SQLUnended + ` AND a.status IN ` + SQLLiveStatuses + `),
       d.last_seen_at
FROM devices d ORDER BY d.id`

	sqlSnapshotJournal = `
SELECT kind, job_id::text, coalesce(attempt_id::text, ''), coalesce(from_status, ''), to_status,
       code, actor, at
FROM job_events ORDER BY id`
)

// Snapshot projects the database exactly as protocol.Snapshot documents, with
// every time in UTC so that it compares equal to the model's. Run it inside a
// REPEATABLE READ transaction if writers may be active and the slices must
// agree with each other.
func Snapshot(ctx context.Context, q Querier) (protocol.Snapshot, error) {
	var s protocol.Snapshot
	err := readAll(ctx, q, snapshotReads(&s))
	return s, err
}

// snapshotReads are Snapshot's statements, one per slice of s.
func snapshotReads(s *protocol.Snapshot) []read {
	return []read{
		{what: "snapshot jobs", sql: sqlSnapshotJobs, row: into(&s.Jobs, scanJobRow)},
		{what: "snapshot attempts", sql: sqlSnapshotAttempts, row: into(&s.Attempts, scanAttemptRow)},
		{what: "snapshot buyers", sql: sqlSnapshotBuyers, row: into(&s.Buyers, scanBuyerRow)},
		{what: "snapshot devices", sql: sqlSnapshotDevices, row: into(&s.Devices, scanDeviceRow)},
		{what: "snapshot journal", sql: sqlSnapshotJournal, row: into(&s.Journal, scanEventRow)},
	}
}

// collect runs query and scans every row with scan; an empty result is a
// nil slice, as in the model's zero Snapshot.
func collect[T any](ctx context.Context, q Querier, query string, scan func(pgx.Row) (T, error), args ...any) ([]T, error) {
	rows, err := q.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

func scanJobRow(r pgx.Row) (protocol.JobRow, error) {
	var j protocol.JobRow
	var webhooks int64
	err := r.Scan(&j.ID, &j.BuyerID, &j.Service, &j.Status, &j.FailureCode, &j.MaxAttempts, &j.AttemptCount,
		&j.WithdrawnCount, &j.CreatedAt, &j.AdmissionDeadline, &j.HoldStatus, &j.HoldCents, &webhooks, &j.OutputSHA256,
		&j.SucceededAttemptID)
	j.Webhooks = int(webhooks)
	j.CreatedAt, j.AdmissionDeadline = j.CreatedAt.UTC(), j.AdmissionDeadline.UTC()
	return j, err
}

func scanAttemptRow(r pgx.Row) (protocol.AttemptRow, error) {
	var a protocol.AttemptRow
	err := r.Scan(&a.ID, &a.JobID, &a.DeviceID, &a.Number, &a.Status, &a.LeaseEpoch, &a.LeaseExpiresAt,
		&a.TokenHash, &a.FailureCode)
	a.LeaseExpiresAt = a.LeaseExpiresAt.UTC()
	return a, err
}

func scanBuyerRow(r pgx.Row) (protocol.BuyerRow, error) {
	var b protocol.BuyerRow
	err := r.Scan(&b.ID, &b.BalanceCents, &b.HeldCents, &b.CapturedCents)
	return b, err
}

// scanDeviceRow leaves LastSeenAt zero for a device never seen, which is
// how the model represents "never".
func scanDeviceRow(r pgx.Row) (protocol.DeviceRow, error) {
	var d protocol.DeviceRow
	var live int64
	var seen *time.Time
	err := r.Scan(&d.ID, &d.Status, &live, &seen)
	d.LiveAttempts = int(live)
	if seen != nil {
		d.LastSeenAt = seen.UTC()
	}
	return d, err
}

func scanEventRow(r pgx.Row) (protocol.EventRow, error) {
	var e protocol.EventRow
	err := r.Scan(&e.Kind, &e.JobID, &e.AttemptID, &e.From, &e.To, &e.Code, &e.Actor, &e.At)
	e.At = e.At.UTC()
	return e, err
}
