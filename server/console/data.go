package console

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/store"
)

// The console's reads. None selects a secret column (api_keys.key_hash,
// devices.token_hash, job_attempts.commit_token_hash, pairing_codes,
// operators.token_hash): what is not read cannot be rendered.
const (
	sqlLiveAttempts = `
SELECT a.id::text, a.job_id::text, a.device_id::text, a.attempt_number, a.status, a.lease_epoch, a.lease_expires_at,
       a.created_at, j.service
FROM job_attempts a JOIN jobs j ON j.id = a.job_id
WHERE a.` + store.SQLUnended + ` AND a.status IN ` + store.SQLLiveStatuses + ` ORDER BY a.created_at, a.id`

	// sqlThroughput counts jobs ending per minute and status since $1
	// (job_events_terminal_idx: one entry per job).
	sqlThroughput = `
SELECT date_trunc('minute', at), to_status, count(*) FROM job_events
WHERE kind = 'job' AND to_status IN ('succeeded', 'cancelled', 'failed') AND at >= $1
GROUP BY 1, 2 ORDER BY 1`

	sqlBuyers = `SELECT id::text, name FROM buyers ORDER BY name, id LIMIT 1000`

	jobListColumns = `j.id::text, j.status, j.service, j.buyer_id::text, b.name, j.attempt_count, j.max_attempts,
coalesce(j.failure_code, ''), j.created_at, j.updated_at`

	sqlJob = `SELECT ` + jobListColumns + `, j.input_bytes, coalesce(j.output_key, ''), coalesce(j.output_bytes, 0),
j.admission_deadline, j.params::text
FROM jobs j JOIN buyers b ON b.id = j.buyer_id WHERE j.id = $1`

	sqlJobAttempts = `
SELECT a.id::text, a.attempt_number, a.status, a.device_id::text, d.name, a.lease_epoch, a.lease_expires_at,
       coalesce(a.failure_code, ''), a.created_at, a.ended_at, coalesce(a.failure_message, '')
FROM job_attempts a JOIN devices d ON d.id = a.device_id WHERE a.job_id = $1 ORDER BY a.attempt_number`

	sqlJobJournal = `
SELECT e.id, e.kind, coalesce(e.attempt_id::text, ''), coalesce(a.attempt_number, 0), coalesce(a.lease_epoch, 0),
       coalesce(e.from_status, ''), e.to_status, e.code,
       e.actor || coalesce(' ' || o.name || ' (' || o.id::text || ')', ''), e.at
FROM job_events e LEFT JOIN job_attempts a ON a.id = e.attempt_id LEFT JOIN operators o ON o.id = e.operator_id
WHERE e.job_id = $1 ORDER BY e.id`

	sqlJobHold = `SELECT amount_cents, status, created_at, settled_at FROM holds WHERE job_id = $1`

	sqlJobWebhooks = `
SELECT id, event, created_at, attempts, next_attempt_at, delivered_at, coalesce(last_error, '')
FROM webhook_outbox WHERE job_id = $1 ORDER BY id`
)

// Fleet is the fleet page.
type Fleet struct {
	Devices                  []Device
	Online, Offline, Revoked int
	SlotsTotal, SlotsUsed    int
	LiveAttempts             []LiveAttempt
	ServicesOnline           []ServiceSlots
	Now                      time.Time
}

// Device is one row of the fleet page.
type Device struct {
	ID, Name, Status string
	Services         []string
	SlotsTotal, Live int
	LastSeen         *time.Time
}

// SlotsFree is the device's free slots (0 unless online).
func (d Device) SlotsFree() int {
	if d.Status != string(protocol.DeviceOnline) {
		return 0
	}
	return max(d.SlotsTotal-d.Live, 0)
}

// ServiceSlots is the online capacity of one service.
type ServiceSlots struct {
	Service             string
	Devices, Free, Used int
}

// LiveAttempt is an attempt in a live status.
type LiveAttempt struct {
	ID, JobID, DeviceID string
	Number              int
	Status              string
	Epoch               int
	LeaseExpiresAt      time.Time
	StartedAt           time.Time
	Service             string
}

// Queue is the queue page.
type Queue struct {
	Services     []QueuedService
	JobsByStatus []StatusCount
	Throughput   []Minute
	Window       time.Duration
	Now          time.Time
}

// QueuedService is the queue of one service.
type QueuedService struct {
	Service   string
	Queued    int64
	OldestAge time.Duration
}

// StatusCount is the number of jobs in one status.
type StatusCount struct {
	Status string
	Count  int64
}

// Minute is the jobs that ended in one minute, by status.
type Minute struct {
	At                           time.Time
	Succeeded, Cancelled, Failed int64
}

// JobRow is one row of the jobs page. Seq is the job's creation row in the
// journal (job_events.id), the jobs page's keyset order.
type JobRow struct {
	ID, Status, Service, BuyerID, BuyerName string
	AttemptCount, MaxAttempts               int
	FailureCode                             string
	CreatedAt, UpdatedAt                    time.Time
	Seq                                     int64
	// Unserved: queued, and no online device offers its service.
	Unserved bool
}

// JobFilter is the jobs page's query: filters, a page size and a keyset
// position (the Seq of the last row of the previous page; 0: the newest).
type JobFilter struct {
	Status, Service, Buyer string
	// Search is a job id or its start (q=); it replaces the filters.
	Search string
	Limit  int
	Before int64
}

// Page sizes of the jobs page.
const (
	DefaultPageSize = 50
	MaxPageSize     = 500
)

// Cursor is the keyset position after row, as the jobs page's "next" link
// carries it.
func Cursor(row JobRow) string { return strconv.FormatInt(row.Seq, 10) }

// ParseCursor reads a Cursor; the position is only compared, so a forged
// one shows another page of the same rows, nothing else.
func ParseCursor(s string) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("cursor %q: want the number a next link carries", s)
	}
	return n, nil
}

// listJobs reads one keyset page, newest first. The order is the journal's:
// every job's first row (null -> queued) is appended in the transaction that
// creates it, so walking job_events' primary key backwards lists jobs newest
// first with no index on the jobs table, which every status change of the
// hot path would have to update. A page costs the journal rows between its
// first and last job, whatever its depth; the WHERE clause names only the
// filters in use.
func listJobs(ctx context.Context, q store.Querier, f JobFilter) ([]JobRow, error) {
	where := []string{"e.kind = 'job'", "e.from_status IS NULL"}
	var args []any
	arg := func(v any) string { args = append(args, v); return "$" + strconv.Itoa(len(args)) }
	if f.Status != "" {
		where = append(where, "j.status = "+arg(f.Status))
	}
	if f.Service != "" {
		where = append(where, "j.service = "+arg(f.Service))
	}
	if f.Buyer != "" {
		where = append(where, "j.buyer_id = "+arg(f.Buyer)+"::uuid")
	}
	if f.Before > 0 {
		where = append(where, "e.id < "+arg(f.Before))
	}
	sql := `SELECT ` + jobListColumns + `, e.id FROM job_events e JOIN jobs j ON j.id = e.job_id JOIN buyers b ON b.id = j.buyer_id
WHERE ` + strings.Join(where, " AND ") + ` ORDER BY e.id DESC LIMIT ` + arg(f.Limit)
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (JobRow, error) {
		var j JobRow
		return j, r.Scan(&j.ID, &j.Status, &j.Service, &j.BuyerID, &j.BuyerName, &j.AttemptCount, &j.MaxAttempts,
			&j.FailureCode, &j.CreatedAt, &j.UpdatedAt, &j.Seq)
	})
}

// jobSearchShown bounds the jobs a search by id prefix lists.
const jobSearchShown = 50

// jobIDPrefix is what the jobs page's search takes: the start of a job id.
var jobIDPrefix = regexp.MustCompile(`^[0-9a-f-]{1,36}$`)

// idRange turns a job id prefix into the smallest and largest uuid that
// start with it, so the search walks the jobs' primary key.
func idRange(prefix string) (lo, hi string, ok bool) {
	hex := strings.ReplaceAll(prefix, "-", "")
	if !jobIDPrefix.MatchString(prefix) || hex == "" || len(hex) > 32 {
		return "", "", false
	}
	dash := func(h string) string { return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:] }
	return dash(hex + strings.Repeat("0", 32-len(hex))), dash(hex + strings.Repeat("f", 32-len(hex))), true
}

// searchJobs lists the jobs whose id starts with prefix, in id order.
func searchJobs(ctx context.Context, q store.Querier, prefix string) ([]JobRow, error) {
	lo, hi, ok := idRange(prefix)
	if !ok {
		return nil, fmt.Errorf("search %q: want the start of a job id (hex digits and dashes)", prefix)
	}
	rows, err := q.Query(ctx, `SELECT `+jobListColumns+`, 0::bigint FROM jobs j JOIN buyers b ON b.id = j.buyer_id
WHERE j.id BETWEEN $1::uuid AND $2::uuid ORDER BY j.id LIMIT $3`, lo, hi, jobSearchShown)
	if err != nil {
		return nil, fmt.Errorf("search jobs: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (JobRow, error) {
		var j JobRow
		return j, r.Scan(&j.ID, &j.Status, &j.Service, &j.BuyerID, &j.BuyerName, &j.AttemptCount, &j.MaxAttempts,
			&j.FailureCode, &j.CreatedAt, &j.UpdatedAt, &j.Seq)
	})
}

// sqlServedServices lists the services some online device offers.
const sqlServedServices = `SELECT DISTINCT unnest(services) FROM devices WHERE status = 'online'`

// servedServices is the set of services some online device offers.
func servedServices(ctx context.Context, q store.Querier) (map[string]bool, error) {
	rows, err := q.Query(ctx, sqlServedServices)
	if err != nil {
		return nil, fmt.Errorf("services online: %w", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("services online: %w", err)
	}
	out := make(map[string]bool, len(names))
	for _, n := range names {
		out[n] = true
	}
	return out, nil
}

// markUnserved flags the queued rows whose service no online device offers.
func markUnserved(jobs []JobRow, served map[string]bool) {
	for i := range jobs {
		jobs[i].Unserved = jobs[i].Status == string(protocol.JobQueued) && !served[jobs[i].Service]
	}
}

// Buyer names a buyer for the jobs page's filter.
type Buyer struct{ ID, Name string }

func listBuyers(ctx context.Context, q store.Querier) ([]Buyer, error) {
	rows, err := q.Query(ctx, sqlBuyers)
	if err != nil {
		return nil, fmt.Errorf("list buyers: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Buyer, error) {
		var b Buyer
		return b, r.Scan(&b.ID, &b.Name)
	})
}

// JobPage is a job's page: the job, its attempts with their phases, its
// journal as a timeline, its hold and its webhooks.
type JobPage struct {
	Job JobRow
	// DownloadURL is a download grant of a succeeded job's output, as
	// the buyer's GET /v1/jobs/{id} gives one.
	DownloadURL string
	InputBytes  int64
	OutputKey   string
	OutputBytes int64
	Deadline    time.Time
	Params      string
	Attempts    []AttemptView
	Timeline    []Entry
	Hold        *Hold
	Webhooks    []Webhook
}

// Terminal reports whether the job has ended (nothing to cancel).
func (p JobPage) Terminal() bool { return protocol.JobStatus(p.Job.Status).Terminal() }

// FailureMessage is the device's reason for the job's failure: the
// message of its last attempt that ended with one.
func (p JobPage) FailureMessage() string {
	if p.Job.FailureCode == "" {
		return ""
	}
	for i := len(p.Attempts) - 1; i >= 0; i-- {
		if m := p.Attempts[i].FailureMessage; m != "" {
			return m
		}
	}
	return ""
}

// AttemptView is one attempt of a job with its phases.
type AttemptView struct {
	ID               string
	Number           int
	Status, DeviceID string
	DeviceName       string
	Epoch            int
	LeaseExpiresAt   time.Time
	FailureCode      string
	// FailureMessage is the device's cleaned reason (SPEC section 5).
	FailureMessage string
	StartedAt      time.Time
	EndedAt        *time.Time
	Phases         []Entry
}

// Ended says why the attempt ended ("" while it is live).
func (a AttemptView) Ended() string {
	if a.EndedAt == nil {
		return ""
	}
	var last Entry
	if len(a.Phases) > 0 {
		last = a.Phases[len(a.Phases)-1]
	}
	why := a.Status
	if a.FailureCode != "" {
		why += " (" + a.FailureCode + ")"
	}
	if last.Actor != "" {
		why += " by the " + last.Actor
	}
	return why
}

// Entry is one journal row with the four identities of SPEC section 1:
// the job, the attempt, its lease epoch, and whether the device presented
// the attempt's commit token for it (commit and fail carry it; a row
// exists only when it matched). Never the token or its hash.
type Entry struct {
	Seq                  int64
	Kind                 string
	AttemptID            string
	AttemptNumber, Epoch int
	From, To, Code       string
	Actor                string
	At                   time.Time
}

// Token says what happened to the attempt's commit token at this row:
// "issued" with the lease offer (only its hash is stored), "presented"
// when the device's commit or fail carried it, "" otherwise.
func (e Entry) Token() string {
	switch {
	case e.Kind != "attempt":
		return ""
	case e.From == "":
		return "issued"
	case e.Actor == string(protocol.ActorDevice) &&
		(e.To == string(protocol.AttemptCommitting) || e.To == string(protocol.AttemptFailed)):
		return "presented"
	}
	return ""
}

// Hold is a job's hold on its buyer's balance.
type Hold struct {
	AmountCents int64
	Status      string
	CreatedAt   time.Time
	SettledAt   *time.Time
}

// Webhook is one outbox row of a job (its payload is not shown).
type Webhook struct {
	ID            int64
	Event         string
	CreatedAt     time.Time
	Attempts      int
	NextAttemptAt time.Time
	DeliveredAt   *time.Time
	LastError     string
}

// noWebhookURL is the outbox's last_error of an event whose buyer had no
// webhook URL: marked delivered so the deliverer skips it, never sent.
const noWebhookURL = "no webhook url"

// NotSent reports whether the event was never sent (no webhook URL).
func (w Webhook) NotSent() bool { return w.LastError == noWebhookURL }

// errNoJob means no job has the id.
var errNoJob = fmt.Errorf("no such job")

// loadJob reads a job's page in one read-only snapshot.
func loadJob(ctx context.Context, tx pgx.Tx, id string) (JobPage, error) {
	var p JobPage
	if !protocol.ValidID(id) {
		return p, errNoJob
	}
	j := &p.Job
	err := tx.QueryRow(ctx, sqlJob, id).Scan(&j.ID, &j.Status, &j.Service, &j.BuyerID, &j.BuyerName, &j.AttemptCount,
		&j.MaxAttempts, &j.FailureCode, &j.CreatedAt, &j.UpdatedAt, &p.InputBytes, &p.OutputKey, &p.OutputBytes,
		&p.Deadline, &p.Params)
	if err == pgx.ErrNoRows {
		return p, errNoJob
	}
	if err != nil {
		return p, fmt.Errorf("read job %s: %w", id, err)
	}
	rows, err := tx.Query(ctx, sqlJobAttempts, id)
	if err == nil {
		p.Attempts, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (AttemptView, error) {
			var a AttemptView
			return a, r.Scan(&a.ID, &a.Number, &a.Status, &a.DeviceID, &a.DeviceName, &a.Epoch, &a.LeaseExpiresAt,
				&a.FailureCode, &a.StartedAt, &a.EndedAt, &a.FailureMessage)
		})
	}
	if err != nil {
		return p, fmt.Errorf("read attempts of %s: %w", id, err)
	}
	rows, err = tx.Query(ctx, sqlJobJournal, id)
	if err == nil {
		p.Timeline, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (Entry, error) {
			var e Entry
			return e, r.Scan(&e.Seq, &e.Kind, &e.AttemptID, &e.AttemptNumber, &e.Epoch, &e.From, &e.To, &e.Code, &e.Actor, &e.At)
		})
	}
	if err != nil {
		return p, fmt.Errorf("read journal of %s: %w", id, err)
	}
	for i := range p.Attempts {
		for _, e := range p.Timeline {
			if e.AttemptID == p.Attempts[i].ID {
				p.Attempts[i].Phases = append(p.Attempts[i].Phases, e)
			}
		}
	}
	var h Hold
	switch err := tx.QueryRow(ctx, sqlJobHold, id).Scan(&h.AmountCents, &h.Status, &h.CreatedAt, &h.SettledAt); {
	case err == nil:
		p.Hold = &h
	case err != pgx.ErrNoRows:
		return p, fmt.Errorf("read hold of %s: %w", id, err)
	}
	rows, err = tx.Query(ctx, sqlJobWebhooks, id)
	if err == nil {
		p.Webhooks, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (Webhook, error) {
			var w Webhook
			return w, r.Scan(&w.ID, &w.Event, &w.CreatedAt, &w.Attempts, &w.NextAttemptAt, &w.DeliveredAt, &w.LastError)
		})
	}
	if err != nil {
		return p, fmt.Errorf("read webhooks of %s: %w", id, err)
	}
	return p, nil
}

// loadFleet reads the fleet page.
func loadFleet(ctx context.Context, tx pgx.Tx, devices []Device) (Fleet, error) {
	f := Fleet{Devices: devices}
	rows, err := tx.Query(ctx, sqlLiveAttempts)
	if err == nil {
		f.LiveAttempts, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (LiveAttempt, error) {
			var a LiveAttempt
			return a, r.Scan(&a.ID, &a.JobID, &a.DeviceID, &a.Number, &a.Status, &a.Epoch, &a.LeaseExpiresAt, &a.StartedAt, &a.Service)
		})
	}
	if err != nil {
		return f, fmt.Errorf("read live attempts: %w", err)
	}
	bySvc := map[string]*ServiceSlots{}
	for _, d := range devices {
		switch d.Status {
		case string(protocol.DeviceOnline):
			f.Online++
			f.SlotsTotal += d.SlotsTotal
			f.SlotsUsed += min(d.Live, d.SlotsTotal)
			for _, s := range d.Services {
				ss := bySvc[s]
				if ss == nil {
					ss = &ServiceSlots{Service: s}
					bySvc[s] = ss
				}
				ss.Devices++
				ss.Free += d.SlotsFree()
				ss.Used += min(d.Live, d.SlotsTotal)
			}
		case string(protocol.DeviceRevoked):
			f.Revoked++
		default:
			f.Offline++
		}
	}
	for _, s := range protocol.Services {
		if ss := bySvc[s.Name]; ss != nil {
			f.ServicesOnline = append(f.ServicesOnline, *ss)
			delete(bySvc, s.Name)
		}
	}
	for _, ss := range bySvc { // services outside the catalogue, if any
		f.ServicesOnline = append(f.ServicesOnline, *ss)
	}
	return f, nil
}

// throughput reads the jobs that ended per minute since since.
func throughput(ctx context.Context, q store.Querier, since time.Time) ([]Minute, error) {
	rows, err := q.Query(ctx, sqlThroughput, since)
	if err != nil {
		return nil, fmt.Errorf("read throughput: %w", err)
	}
	var out []Minute
	var at time.Time
	var status string
	var n int64
	_, err = pgx.ForEachRow(rows, []any{&at, &status, &n}, func() error {
		if len(out) == 0 || !out[len(out)-1].At.Equal(at) {
			out = append(out, Minute{At: at.UTC()})
		}
		m := &out[len(out)-1]
		switch status {
		case string(protocol.JobSucceeded):
			m.Succeeded = n
		case string(protocol.JobCancelled):
			m.Cancelled = n
		default:
			m.Failed = n
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read throughput: %w", err)
	}
	return out, nil
}
