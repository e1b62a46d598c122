package scenarios

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/protocol/buyer"
)

// The core rules' own steps: a transaction of the harness's that holds
// rows against the service layer (`txn`), the service layer's retry count
// (`retries`), creates whose params are raw JSON values (`create-params`),
// a frame of a given size (`bigslots`), and the schema's own refusals,
// probed by writing what it must refuse straight into the database
// (`constraint transitions|inserts|fence_one`, see schemaProbes).

func init() {
	for name, h := range map[string]scCommand{
		"txn": cmdTxn, "retries": cmdRetries, "create-params": cmdCreateParams, "bigslots": cmdBigSlots,
		"service-create": cmdServiceCreate,
	} {
		scCommands[name] = h
	}
}

// scTxn is a transaction of the harness's own, on a connection of its own
// (not the observer's pool, whose Close would wait for it).
type scTxn struct {
	conn *pgx.Conn
	tx   pgx.Tx
}

// sqlHeldAttempt inserts a live attempt of job $1 on device $2 with the
// next attempt number: its unique index entries go in first, and then its
// foreign-key checks lock the job's and the device's rows (FOR KEY SHARE),
// waiting for a transaction that holds either.
const sqlHeldAttempt = `
INSERT INTO job_attempts (id, job_id, attempt_number, device_id, status, lease_epoch, commit_token_hash,
                          lease_expires_at, created_at)
SELECT gen_random_uuid(), j.id, j.attempt_count + 1, $2, 'leased', 1, encode(sha256(gen_random_uuid()::text::bytea), 'hex'),
       now() + interval '1 minute', now()
FROM jobs j WHERE j.id = $1`

// cmdTxn opens a transaction of the harness's and writes in it in the
// background, or ends it. `txn T live-attempt J device=D` inserts a live
// attempt of J on D (sqlHeldAttempt) under background name T, so that
// `await lock T` sees it wait; the transaction raises its own
// deadlock_timeout (a superuser's setting: `postgres: dedicated`), so that
// in a deadlock with the service layer the service's transaction is the
// one Postgres breaks. `txn T rollback -> OUTCOME` awaits the write
// (inserted, or the SQLSTATE that refused it) and rolls it back.
// Example: txn h1 live-attempt j1 device=d1
// Example: txn h1 rollback -> inserted
func cmdTxn(r *scRun, st scStep) error {
	name := arg(st, 0)
	switch arg(st, 1) {
	case "live-attempt":
		return r.txnLiveAttempt(name, st)
	case "rollback":
		err := r.outcome(scStep{line: st.line, text: st.text, cmd: st.cmd, args: []string{name}, arrow: st.arrow})
		r.closeTxn(name)
		r.tl.add(laneDatabase, "harness transaction "+name+" rolled back")
		return err
	}
	return errors.New("want: txn NAME live-attempt JOB device=D | txn NAME rollback -> OUTCOME")
}

func (r *scRun) txnLiveAttempt(name string, st scStep) error {
	jobID, err := r.jobID(arg(st, 2))
	if err != nil {
		return err
	}
	r.mu.Lock()
	deviceID, ok := r.devices[st.opt("device", "")]
	r.mu.Unlock()
	if !ok {
		return fmt.Errorf("txn %s: no registered device %q (device=)", name, st.opt("device", ""))
	}
	conn, err := pgx.Connect(r.ctx, r.dbURL)
	if err != nil {
		return fmt.Errorf("txn %s: connect: %w", name, err)
	}
	tx, err := conn.Begin(r.ctx)
	if err == nil {
		_, err = tx.Exec(r.ctx, `SET LOCAL deadlock_timeout = '10min'`)
	}
	if err != nil {
		_ = conn.Close(context.Background())
		return fmt.Errorf("txn %s: begin with a long deadlock_timeout (needs a superuser: postgres: dedicated): %w", name, err)
	}
	if r.txns == nil {
		r.txns = map[string]*scTxn{}
	}
	r.txns[name] = &scTxn{conn: conn, tx: tx}
	what := fmt.Sprintf("harness transaction %s inserting a live attempt of %s on %s", name, arg(st, 2), st.opt("device", ""))
	return r.background(name, what, func() (string, error) {
		_, err := tx.Exec(r.ctx, sqlHeldAttempt, jobID, deviceID)
		var pe *pgconn.PgError
		switch {
		case err == nil:
			return "inserted", nil
		case errors.As(err, &pe):
			return pe.Code, nil
		}
		return "", err
	})
}

// closeTxn rolls back and closes the transaction name, if it is open.
func (r *scRun) closeTxn(name string) {
	t := r.txns[name]
	if t == nil {
		return
	}
	delete(r.txns, name)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = t.tx.Rollback(ctx)
	_ = t.conn.Close(ctx)
}

// closeTxns ends every harness transaction a failed script left open.
func (r *scRun) closeTxns() {
	for _, name := range slices.Sorted(maps.Keys(r.txns)) {
		r.closeTxn(name)
	}
}

// cmdRetries checks how often the harness's own service layer (the one
// `lease` and `register` use) re-ran a transaction after a serialization
// failure or a deadlock, by operation (fencing's Op names).
// Example: retries lease=1
func cmdRetries(r *scRun, st scStep) error {
	got := r.admin.Stats().Retries
	for _, op := range slices.Sorted(maps.Keys(st.kv)) {
		want, err := strconv.ParseInt(st.kv[op], 10, 64)
		if err != nil {
			return fmt.Errorf("retries %s=%s: %w", op, st.kv[op], err)
		}
		r.tl.add(laneGateway, fmt.Sprintf("service layer retried %s %d time(s)", op, got[op]))
		if got[op] != want {
			return fmt.Errorf("retries: want %s retried %d time(s), got %d (all: %v)", op, want, got[op], got)
		}
		r.count("tx_retries", got[op])
	}
	r.reply(fmt.Sprintf("retries %v", got))
	return nil
}

// cmdCreateParams sends POST /v1/jobs for the scenario's service with the
// params p.KEY=VALUE, each VALUE a raw JSON value ('text' a JSON string),
// and max_attempts= when given, and checks the answer: `-> created` (the
// job gets NAME) or `-> CODE FIELD` (a refusal naming that field).
// Example: create-params j2 p.delay_ms=5 -> created
// Example: create-params j3 p.seed=5 max_attempts=0 -> validation_error max_attempts
func cmdCreateParams(r *scRun, st scStep) error {
	name := arg(st, 0)
	if name == "" || len(st.arrow) == 0 {
		return errors.New("want: create-params NAME [p.KEY=VALUE...] [max_attempts=N] -> created|CODE FIELD")
	}
	params := map[string]json.RawMessage{}
	body := map[string]any{"service": scService, "input_base64": base64.StdEncoding.EncodeToString([]byte("input of " + name))}
	for k, v := range st.kv {
		key, isParam := strings.CutPrefix(k, "p.")
		switch {
		case isParam:
			params[key] = rawJSON(v)
		case k == "max_attempts":
			body[k] = rawJSON(v)
		default:
			return fmt.Errorf("create-params: unknown option %s (want p.KEY=VALUE or max_attempts=N)", k)
		}
	}
	body["params"] = params
	raw, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("create-params %s: %w", name, err)
	}
	gw, err := r.stack(st.opt("via", "gw1"))
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(r.ctx, http.MethodPost, gw.baseURL()+"/v1/jobs", bytes.NewReader(raw))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+r.apiKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.httpc.Do(req)
	if err != nil {
		return fmt.Errorf("create-params %s: %w", name, err)
	}
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	_ = resp.Body.Close()
	got := "created"
	if resp.StatusCode == http.StatusCreated {
		var job buyer.JobDetail
		if err := json.Unmarshal(data, &job); err != nil || !protocol.ValidID(job.ID) {
			return fmt.Errorf("create-params %s: 201 without a job: %s", name, data)
		}
		r.mu.Lock()
		r.jobs[name] = job.ID
		r.mu.Unlock()
		r.setName(job.ID, name)
	} else {
		var e buyer.Error
		_ = json.Unmarshal(data, &e)
		got = strings.TrimSpace(e.Code + " " + e.Field)
		if e.Code == "" {
			got = "http_" + strconv.Itoa(resp.StatusCode)
		}
		r.count("create.refused", 1)
	}
	r.tl.add(laneGateway, fmt.Sprintf("buyer -> POST /v1/jobs (%s) params %s: %d %s", name, raw, resp.StatusCode, got))
	r.reply("create-params " + name + " -> " + got)
	if want := strings.Join(st.arrow, " "); got != want {
		return fmt.Errorf("create-params %s (params %s): want %s, got HTTP %d %s", name, body["params"], want, resp.StatusCode, data)
	}
	return nil
}

// cmdServiceCreate calls the service layer's CreateJob (as the harness's
// own service, at the pinned instant) with a request valid but for what
// the options break, and checks the refusal's code and field: buyer=unknown
// (a buyer id no row has), service=NAME, max_attempts=N, window=DURATION,
// bytes=N (the input's), sha=bad, param=bad (a key outside [a-z0-9_]),
// key=long (an Idempotency-Key of 201 bytes). It reaches what the HTTP API
// cannot send: an unknown buyer.
// Example: service-create buyer=unknown max_attempts=0 -> not_found buyer
func cmdServiceCreate(r *scRun, st scStep) error {
	req := protocol.CreateJobRequest{BuyerID: scBuyerID, Service: scService, Params: map[string]string{},
		Input:       protocol.InputRef{Bytes: 1, SHA256: strings.Repeat("a", 64)},
		MaxAttempts: protocol.MaxAttemptsDefault, AdmissionWindow: time.Hour}
	for _, k := range slices.Sorted(maps.Keys(st.kv)) {
		v := st.kv[k]
		var err error
		switch {
		case k == "buyer" && v == "unknown":
			req.BuyerID = "00000000-0000-4000-8000-00000000dead"
		case k == "service":
			req.Service = v
		case k == "max_attempts":
			req.MaxAttempts, err = strconv.Atoi(v)
		case k == "window":
			req.AdmissionWindow, err = time.ParseDuration(v)
		case k == "bytes":
			req.Input.Bytes, err = strconv.ParseInt(v, 10, 64)
		case k == "sha" && v == "bad":
			req.Input.SHA256 = strings.Repeat("A", 64)
		case k == "param" && v == "bad":
			req.Params["Bad-Key"] = "x"
		case k == "key" && v == "long":
			req.IdempotencyKey = strings.Repeat("k", 201)
		default:
			return fmt.Errorf("service-create: unknown option %s=%s", k, v)
		}
		if err != nil {
			return fmt.Errorf("service-create %s=%s: %w", k, v, err)
		}
	}
	rep, err := r.admin.CreateJob(r.ctx, r.clock.Now(), req)
	if err != nil {
		return fmt.Errorf("service-create: %w", err)
	}
	got := strings.TrimSpace(string(rep.Code) + " " + rep.Field)
	label := strings.Join(st.args, " ")
	for _, k := range slices.Sorted(maps.Keys(st.kv)) {
		label += " " + k + "=" + st.kv[k]
	}
	r.tl.add(laneGateway, fmt.Sprintf("CreateJob (service layer) %s -> %s", strings.TrimSpace(label), got))
	r.reply("service-create -> " + got)
	if rep.Code != protocol.CodeCreated {
		r.count("create.refused", 1)
	}
	if want := strings.Join(st.arrow, " "); got != want {
		return fmt.Errorf("service-create%s: want %s, got %s", label, want, got)
	}
	return nil
}

// rawJSON is a script's value as JSON: 'text' is the JSON string text,
// anything else is taken as a JSON literal as written (5, 5.0, true).
func rawJSON(v string) json.RawMessage {
	if len(v) >= 2 && strings.HasPrefix(v, "'") && strings.HasSuffix(v, "'") {
		b, _ := json.Marshal(v[1 : len(v)-1])
		return b
	}
	return json.RawMessage(v)
}

// cmdBigSlots sends a valid slots frame padded with blanks inside its
// object to exactly bytes= bytes, to hold the gateway to its read limit.
// Example: bigslots a1 free=0 bytes=60000
func cmdBigSlots(r *scRun, st scStep) error {
	a, err := r.agent(arg(st, 0))
	if err != nil {
		return err
	}
	free, err := optInt(st, "free", 0)
	if err != nil {
		return err
	}
	size, err := optInt(st, "bytes", 0)
	if err != nil {
		return err
	}
	frame := fmt.Sprintf(`{"type":"slots","slots_free":%d`, free)
	if size < len(frame)+1 {
		return fmt.Errorf("bigslots: bytes=%d is smaller than the frame itself", size)
	}
	raw := frame + strings.Repeat(" ", size-len(frame)-1) + "}"
	ctx, cancel := context.WithTimeout(r.ctx, r.timeout)
	defer cancel()
	r.tl.add(laneAgent, fmt.Sprintf("%s -> slots free=%d padded to %d bytes", a.name, free, len(raw)))
	return a.client.SendRaw(ctx, []byte(raw))
}

// schemaProbes are the `constraint` checks of what the database refuses by
// itself (docs/semantics.md, "What the database refuses by itself"): each
// writes, in a transaction it always rolls back, what the schema must
// refuse whatever the code above it does.
var schemaProbes = map[string]func(*scRun, scStep) error{
	"transitions": probeTransitions, "inserts": probeInserts, "fence_one": probeFenceOne,
}

// probeTransitions writes every status the tables forbid from the job's
// status and from its latest attempt's, each in a savepoint: the status
// triggers must refuse each one (check_violation, "illegal ... transition"),
// before any other rule of the row is looked at.
// Example: constraint transitions j1
func probeTransitions(r *scRun, st scStep) error {
	id, err := r.jobID(arg(st, 1))
	if err != nil {
		return err
	}
	return r.rolledBack(func(tx pgx.Tx) error {
		var job protocol.JobStatus
		if err := tx.QueryRow(r.ctx, `SELECT status FROM jobs WHERE id = $1`, id).Scan(&job); err != nil {
			return fmt.Errorf("read job %s: %w", r.name(id), err)
		}
		var tried []string
		for _, to := range protocol.JobStatuses {
			if to == job || protocol.AssertJobTransition(job, to) == nil {
				continue
			}
			what := fmt.Sprintf("job %s %s -> %s", r.name(id), job, to)
			if err := refused(r.ctx, tx, what, "illegal job transition", `UPDATE jobs SET status = $2 WHERE id = $1`, id, string(to)); err != nil {
				return err
			}
			tried = append(tried, string(to))
		}
		var attemptID string
		var attempt protocol.AttemptStatus
		err := tx.QueryRow(r.ctx, `SELECT id::text, status FROM job_attempts WHERE job_id = $1 ORDER BY attempt_number DESC LIMIT 1`, id).
			Scan(&attemptID, &attempt)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
		case err != nil:
			return fmt.Errorf("read the attempts of %s: %w", r.name(id), err)
		}
		var triedAttempt []string
		for _, to := range protocol.AttemptStatuses {
			if attemptID == "" || to == attempt || protocol.AssertAttemptTransition(attempt, to) == nil {
				continue
			}
			what := fmt.Sprintf("attempt %s %s -> %s", r.name(attemptID), attempt, to)
			if err := refused(r.ctx, tx, what, "illegal attempt transition", `UPDATE job_attempts SET status = $2 WHERE id = $1`, attemptID, string(to)); err != nil {
				return err
			}
			triedAttempt = append(triedAttempt, string(to))
		}
		label := fmt.Sprintf("status triggers refused job %s %s -> {%s}", r.name(id), job, strings.Join(tried, ","))
		if attemptID != "" {
			label += fmt.Sprintf(", attempt %s %s -> {%s}", r.name(attemptID), attempt, strings.Join(triedAttempt, ","))
		}
		r.tl.add(laneDatabase, label)
		r.count("transition_refused", int64(len(tried)+len(triedAttempt)))
		return nil
	})
}

// probeInserts inserts, beside the job, a job in every status but queued
// and an attempt of a queued job in every status but leased, each in a
// savepoint: the insert triggers must refuse each one. A queued job and a
// leased attempt written the same way are accepted, so the refusals are
// the triggers' and nothing else's.
// Example: constraint inserts j1
func probeInserts(r *scRun, st scStep) error {
	id, err := r.jobID(arg(st, 1))
	if err != nil {
		return err
	}
	const insertJob = `
INSERT INTO jobs (id, buyer_id, service, params, input_bytes, input_sha256, max_attempts, attempt_count, status,
                  request_fingerprint, created_at, admission_deadline, updated_at)
SELECT $2, buyer_id, service, params, input_bytes, input_sha256, max_attempts, 0, $3,
       request_fingerprint, created_at, admission_deadline, updated_at
FROM jobs WHERE id = $1`
	const insertAttempt = `
INSERT INTO job_attempts (id, job_id, attempt_number, device_id, status, lease_epoch, commit_token_hash,
                          lease_expires_at, created_at)
SELECT gen_random_uuid(), $1, $2, d.id, $3, 1, encode(sha256(gen_random_uuid()::text::bytea), 'hex'), now(), now()
FROM (SELECT id FROM devices ORDER BY id LIMIT 1) d`
	return r.rolledBack(func(tx pgx.Tx) error {
		probe := "00000000-0000-4000-8000-0000000fffff"
		for n, s := range protocol.JobStatuses {
			if s == protocol.JobQueued {
				continue
			}
			what := fmt.Sprintf("insert of a job %s", s)
			if err := refused(r.ctx, tx, what, "illegal job insert", insertJob, id, fmt.Sprintf("00000000-0000-4000-8000-%012x", 0xff00+n), string(s)); err != nil {
				return err
			}
		}
		if tag, err := tx.Exec(r.ctx, insertJob, id, probe, string(protocol.JobQueued)); err != nil || tag.RowsAffected() != 1 {
			return fmt.Errorf("constraint inserts: a queued job written as the probes are was not accepted (%d rows): %v", tag.RowsAffected(), err)
		}
		for n, s := range protocol.AttemptStatuses {
			if s == protocol.AttemptLeased {
				continue
			}
			what := fmt.Sprintf("insert of an attempt %s", s)
			if err := refused(r.ctx, tx, what, "illegal attempt insert", insertAttempt, probe, n+1, string(s)); err != nil {
				return err
			}
		}
		if tag, err := tx.Exec(r.ctx, insertAttempt, probe, 1, string(protocol.AttemptLeased)); err != nil || tag.RowsAffected() != 1 {
			return fmt.Errorf("constraint inserts: a leased attempt written as the probes are was not accepted (needs a device; %d rows): %v",
				tag.RowsAffected(), err)
		}
		n := len(protocol.JobStatuses) + len(protocol.AttemptStatuses) - 2
		r.tl.add(laneDatabase, fmt.Sprintf("insert triggers refused %d inserts (jobs not queued, attempts not leased); a queued job and a leased attempt were accepted", n))
		r.count("insert_refused", int64(n))
		return nil
	})
}

// probeFenceOne runs writes shaped as the service's fenced ones (a write
// whose rows rendermac_fence_one counts, docs/semantics.md): one that hits
// no row and one that hits every job of the buyer (the script makes two or
// more) must each raise RMF01 and leave their transaction aborted, and one
// that hits exactly one row must pass.
// Example: constraint fence_one j1
func probeFenceOne(r *scRun, st scStep) error {
	id, err := r.jobID(arg(st, 1))
	if err != nil {
		return err
	}
	const fencedWrite = `
WITH fenced AS (UPDATE jobs SET updated_at = updated_at WHERE %s RETURNING 1)
SELECT rendermac_fence_one(count(*), 'probe: ' || $2) FROM fenced`
	return r.rolledBack(func(tx pgx.Tx) error {
		var jobs int
		if err := tx.QueryRow(r.ctx, `SELECT count(*) FROM jobs WHERE buyer_id = (SELECT buyer_id FROM jobs WHERE id = $1)`, id).
			Scan(&jobs); err != nil {
			return err
		}
		if jobs < 2 {
			return fmt.Errorf("constraint fence_one: the buyer of %s has %d job(s); the probe needs two", r.name(id), jobs)
		}
		for _, c := range []struct {
			what, where string
			rows        int
		}{
			{"a write that hits no row", "id = $1 AND false", 0},
			{"a write that hits every job of the buyer", "buyer_id = (SELECT buyer_id FROM jobs WHERE id = $1)", jobs},
			{"a write that hits one row", "id = $1", 1},
		} {
			if _, err := tx.Exec(r.ctx, "SAVEPOINT probe"); err != nil {
				return err
			}
			_, err := tx.Exec(r.ctx, fmt.Sprintf(fencedWrite, c.where), id, c.what)
			var pe *pgconn.PgError
			switch {
			case c.rows == 1 && err != nil:
				return fmt.Errorf("constraint fence_one: %s was refused: %w", c.what, err)
			case c.rows == 1:
			case err == nil:
				return fmt.Errorf("constraint fence_one: %s (%d rows) was accepted", c.what, c.rows)
			case !errors.As(err, &pe) || pe.Code != "RMF01":
				return fmt.Errorf("constraint fence_one: %s (%d rows) was refused, but not with RMF01: %w", c.what, c.rows, err)
			default:
				// The refusal aborts the transaction: nothing after it runs.
				_, err = tx.Exec(r.ctx, "SELECT 1")
				if !errors.As(err, &pe) || pe.Code != "25P02" {
					return fmt.Errorf("constraint fence_one: after %s the transaction goes on (%v)", c.what, err)
				}
				r.count("fence_refused", 1)
			}
			if _, err := tx.Exec(r.ctx, "ROLLBACK TO SAVEPOINT probe"); err != nil {
				return err
			}
		}
		r.tl.add(laneDatabase, fmt.Sprintf("rendermac_fence_one refused fenced writes of 0 and %d rows (RMF01, transaction aborted) and passed one of 1 row", jobs))
		return nil
	})
}

// rolledBack runs probe in a transaction of the observer's that it always
// rolls back.
func (r *scRun) rolledBack(probe func(pgx.Tx) error) error {
	tx, err := r.observer.Begin(r.ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(r.ctx) }()
	return probe(tx)
}

// refused runs one write in a savepoint and requires the schema to refuse
// it with check_violation and a message starting with prefix (the status
// triggers' refuse_status_write), then rolls back to the savepoint.
func refused(ctx context.Context, tx pgx.Tx, what, prefix, sql string, args ...any) error {
	if _, err := tx.Exec(ctx, "SAVEPOINT probe"); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, sql, args...)
	var pe *pgconn.PgError
	switch {
	case err == nil:
		return fmt.Errorf("the database accepted the %s", what)
	case !errors.As(err, &pe) || pe.Code != "23514" || !strings.HasPrefix(pe.Message, prefix):
		return fmt.Errorf("the %s was refused, but not by its status trigger: %w", what, err)
	}
	_, err = tx.Exec(ctx, "ROLLBACK TO SAVEPOINT probe")
	return err
}
