package scenarios

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rendermac/rendermac/client"
	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/protocol/buyer"
)

// cmdCreate has the buyer create a job through the HTTP API (POST /v1/jobs
// on gateway `via`, default gw1) and names it. With `async` the request
// runs in the background and `created` awaits its outcome (scenario_concurrent.go).
// service= orders a service of the script's catalogue with only the
// params= given (strings) and raw= (JSON literals: numbers, booleans);
// inline=no creates it without an input.
// Example: create j1 max_attempts=2 window=1s
// Example: create j2 service=verify.h264 params=duration_s=4 inline=no
// Example: create j3 service=params.demo raw=count=3,loop=true params=mode=fast
// input=NAME sends the upload `input NAME` made (input_id) instead of the
// inline input; `-> CODE` expects the create refused with that code
// (`create j2 input=u2 -> validation_error`).
func cmdCreate(r *scRun, st scStep) error {
	name := arg(st, 0)
	if name == "" || strings.Contains(name, "#") || (arg(st, 1) != "" && arg(st, 1) != "async") {
		return fmt.Errorf("want: create JOB [async] (a name without #)")
	}
	maxAttempts, err := optInt(st, "max_attempts", protocol.MaxAttemptsDefault)
	if err != nil {
		return err
	}
	window, err := time.ParseDuration(st.opt("window", "1h"))
	if err != nil {
		return err
	}
	req := client.CreateRequest{Service: scService, Params: map[string]string{"seed": name},
		Input: []byte("input of " + name), MaxAttempts: new(maxAttempts), AdmissionWindowS: new(int64(window / time.Second)),
		NoIdempotencyKey: true}
	if svc := st.opt("service", ""); svc != "" { // a service of the script's catalogue, with the params given alone
		req.Service, req.Params = svc, map[string]string{}
	}
	params, err := splitParams(st.opt("params", ""))
	if err != nil {
		return err
	}
	maps.Copy(req.Params, params)
	raw, err := splitParams(st.opt("raw", ""))
	if err != nil {
		return err
	}
	if st.opt("inline", "yes") == "no" {
		req.Input = nil
	}
	if in := st.opt("input", ""); in != "" {
		id, ok := r.surfaceState().inputs[in]
		if !ok {
			return fmt.Errorf("create %s: no input %q (declare it with `input %s`)", name, in, in)
		}
		req.Input, req.InputID = nil, id
	}
	gw, err := r.stack(st.opt("via", "gw1"))
	if err != nil {
		return err
	}
	if arg(st, 1) == "async" {
		return r.background(name, "POST /v1/jobs ("+name+")", func() (string, error) {
			got, _, err := r.postJob(gw, name, req, raw)
			return got, err
		})
	}
	got, detail, err := r.postJob(gw, name, req, raw)
	if err != nil {
		return err
	}
	want := "created"
	if len(st.arrow) > 0 {
		want = st.arrow[0]
	}
	if got != want {
		return fmt.Errorf("create %s: want %s, got %s", name, want, detail)
	}
	if got != "created" {
		r.count("create.refused", 1)
	}
	return nil
}

// postJob sends the create (with raw's params as JSON literals, when
// there are any) and, on 201, names the job. It returns "created" or the
// refusal's code, and the reply for error messages.
func (r *scRun) postJob(gw *scStack, name string, req client.CreateRequest, raw map[string]string) (got, detail string, err error) {
	var status int
	var job buyer.JobDetail
	if len(raw) > 0 {
		status, job, err = r.createJobRaw(gw.baseURL(), req, raw)
	} else {
		var created client.Created
		created, err = r.buyer(gw.baseURL(), r.apiKey).Create(r.ctx, req)
		status, job = created.Status, created.Job
	}
	detail = fmt.Sprintf("HTTP %d %s", status, job.ID)
	if err != nil {
		detail = err.Error() // a refusal's status and body, or why there was no reply
	}
	status, code, err := replyOf(status, err)
	if err != nil {
		return "", "", err
	}
	r.tl.add(laneGateway, fmt.Sprintf("buyer -> POST /v1/jobs (%s): %d %s%s", name, status, job.Status, code))
	if status != http.StatusCreated || !protocol.ValidID(job.ID) {
		if code == "" {
			code = "http_" + strconv.Itoa(status)
		}
		return code, detail, nil
	}
	r.mu.Lock()
	r.jobs[name] = job.ID
	r.mu.Unlock()
	r.setName(job.ID, name)
	return "created", detail, nil
}

// cmdCancel has the buyer cancel a job through the HTTP API and checks the
// outcome: cancelled (200), cancelling (202), job_terminal (409), not_found.
// Example: cancel j1 via=gw2 -> cancelling
func cmdCancel(r *scRun, st scStep) error {
	id, gw, err := r.jobVia(st, 0)
	if err != nil {
		return err
	}
	got, err := r.cancelJob(gw.baseURL(), id)
	if err != nil {
		return err
	}
	r.reply("cancel -> " + got)
	if len(st.arrow) > 0 && st.arrow[0] != got {
		return fmt.Errorf("cancel: want %s, got %s", st.arrow[0], got)
	}
	return nil
}

func (r *scRun) cancelJob(base, id string) (string, error) {
	c, err := r.buyer(base, r.apiKey).Cancel(r.ctx, id)
	status, code, err := replyOf(c.Status, err)
	job := c.Job
	if err != nil {
		return "", err
	}
	// The refusal's code, or the cancel's outcome, which the status says:
	// 200 cancelled, 202 cancelling. The body is the job as read after the
	// cancel committed, which a device's fail at once may already have
	// ended (a 202 with a cancelled job).
	got := code
	if code == "" {
		got = map[int]string{http.StatusOK: string(protocol.JobCancelled), http.StatusAccepted: string(protocol.JobCancelling)}[status]
		if got == "" {
			return "", fmt.Errorf("cancel answered %d with no error code", status)
		}
	}
	r.tl.add(laneGateway, fmt.Sprintf("buyer -> POST /v1/jobs/%s/cancel: %d %s (job %s)", r.name(id), status, got, job.Status))
	return got, nil
}

// jobVia resolves the step's i-th argument to a job id and its via=
// option (default gw1) to a stack.
func (r *scRun) jobVia(st scStep, i int) (string, *scStack, error) {
	id, err := r.jobID(arg(st, i))
	if err != nil {
		return "", nil, err
	}
	gw, err := r.stack(st.opt("via", "gw1"))
	return id, gw, err
}

// buyer is the API client of the gateway at base, authenticated by key.
// base is a stack's own http://127.0.0.1:PORT, which New always accepts.
func (r *scRun) buyer(base, key string) *client.Client {
	c, err := client.New(base, key, client.WithHTTPClient(r.httpc))
	if err != nil {
		panic(fmt.Sprintf("scenario stack URL %q: %v", base, err))
	}
	return c
}

// replyOf is a buyer call's outcome as the HTTP status and, for a
// refusal, the API's error code: status is the one of a call the client
// accepted; a call that got no reply is an error.
func replyOf(status int, err error) (int, string, error) {
	var se *client.Error
	switch {
	case err == nil:
		return status, "", nil
	case errors.As(err, &se):
		return se.Status, se.Code, nil
	}
	return 0, "", err
}

// cmdAdvance moves the pinned clock every stack decides by.
// Example: advance 31s
func cmdAdvance(r *scRun, st scStep) error {
	d, err := time.ParseDuration(arg(st, 0))
	if err != nil {
		return err
	}
	r.clock.Advance(d)
	r.tl.add(laneGateway, fmt.Sprintf("clock jumps %s (now t0+%s)", d, r.clock.Now().Sub(scT0)))
	return nil
}

// cmdSweep runs the sweeper of gateway `via` (default gw1) at the pinned
// instant and checks the counts after `->`; `error` there expects the sweep
// to report trouble (an artifact store outage while re-verifying), and
// error=TEXT trouble whose message holds TEXT.
// within= bounds the sweep's wall time: a sweep still running then fails
// the step (a verification that hangs past its own bounds).
// Example: sweep -> lost=1 requeued=1
// Example: sweep within=3s -> reverified=0 "error=output over"
func cmdSweep(r *scRun, st scStep) error {
	gw, err := r.stack(st.opt("via", "gw1"))
	if err != nil {
		return err
	}
	ctx := r.ctx
	within := time.Duration(0)
	if v := st.opt("within", ""); v != "" {
		if within, err = time.ParseDuration(v); err != nil || within <= 0 {
			return fmt.Errorf("sweep: within=%q: want a positive duration", v)
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, within)
		defer cancel()
	}
	started := time.Now()
	res, serr := gw.svc.Sweep(ctx, r.clock.Now())
	r.sweptAt = time.Now()
	if within > 0 && ctx.Err() != nil {
		return fmt.Errorf("sweep: not done within %v (took %v): %v", within, r.sweptAt.Sub(started).Round(time.Millisecond), serr)
	}
	got := map[string]int{"lost": res.Lost, "requeued": res.Requeued, "reverified": res.Reverified,
		"admission_expired": res.AdmissionExpired, "succeeded": res.Succeeded, "failed": res.Failed,
		"cancelled": res.Cancelled, "offline": res.Offline}
	r.count("sweep.reverified", int64(res.Reverified))
	label := fmt.Sprintf("%s sweep: lost=%d requeued=%d reverified=%d admission_expired=%d succeeded=%d failed=%d cancelled=%d",
		gw.name, res.Lost, res.Requeued, res.Reverified, res.AdmissionExpired, res.Succeeded, res.Failed, res.Cancelled)
	if serr != nil {
		label += " error: " + serr.Error()
	}
	r.tl.add(laneGateway, label)
	wantErr := false
	for _, w := range st.arrow {
		if w == "error" {
			wantErr = true
			continue
		}
		if text, ok := strings.CutPrefix(w, "error="); ok { // the trouble reported is this one
			wantErr = true
			if serr == nil || !strings.Contains(serr.Error(), text) {
				return fmt.Errorf("sweep: want an error saying %q, got %v (%s)", text, serr, label)
			}
			continue
		}
		k, v, _ := strings.Cut(w, "=")
		n, err := strconv.Atoi(v)
		if _, known := got[k]; !known || err != nil {
			return fmt.Errorf("sweep: bad expectation %q", w)
		}
		if got[k] != n {
			return fmt.Errorf("sweep: want %s, got %s=%d (%s)", w, k, got[k], label)
		}
	}
	switch {
	case serr != nil && !wantErr:
		return fmt.Errorf("sweep: %w", serr)
	case serr == nil && wantErr:
		return fmt.Errorf("sweep: expected an error, got none (%s)", label)
	}
	return nil
}

// cmdGateway starts a gateway process (a second one on the same database,
// or a restart of a killed one), kills one (sessions cut, in-flight calls
// cancelled) or stops one gracefully (sessions drained). A gateway started
// with console=remote serves its console to any peer (--console-remote).
// Example: gateway kill gw1
// Example: gateway start gw2 console=remote
func cmdGateway(r *scRun, st scStep) error {
	name := arg(st, 1)
	switch arg(st, 0) {
	case "start":
		if st.opt("console", "") == "remote" {
			r.opsState().remote[name] = true // rendermac server --console-remote
		}
		_, err := r.startStack(name)
		return err
	case "kill", "stop":
		gw, err := r.stack(name)
		if err != nil {
			return err
		}
		gw.stop(r, arg(st, 0) == "kill")
		return nil
	}
	return fmt.Errorf("want: gateway start|kill|stop NAME")
}

// cmdStore takes the artifact store down (every call fails with an I/O
// error) or brings it back; `fail OP [n=N]` fails the next N calls of one
// operation (link, copy, open, stat, put) with an injected I/O error;
// `overwrite JOB` and `overwrite-at-seal JOB` write other bytes at the
// output key of JOB's last attempt, now or just before verification seals
// it (scenario_store.go).
// Example: store down
// Example: store fail copy
func cmdStore(r *scRun, st scStep) error {
	switch arg(st, 0) {
	case "fail":
		return r.storeFail(st)
	case "overwrite", "overwrite-at-seal":
		return r.storeOverwrite(st)
	case "down", "up":
		if r.s3 != nil { // the real thing: stop or start the S3 server process
			if err := r.setS3(arg(st, 0) == "up"); err != nil {
				return err
			}
			break
		}
		r.store.down.Store(arg(st, 0) == "down")
	case "full":
		r.store.full.Store(true)
	case "space":
		r.store.full.Store(false)
	default:
		return fmt.Errorf("want: store down|up|full|space")
	}
	r.tl.add(laneDatabase, "artifact store "+arg(st, 0))
	return nil
}

// cmdPostgres stops (fast shutdown), crashes (SIGKILL) or restarts the
// scenario's dedicated cluster on the same port; start waits until every
// running gateway's /readyz answers 200, as an orchestrator would.
// Example: postgres stop
func cmdPostgres(r *scRun, st scStep) error {
	if r.s.pg != "dedicated" {
		return fmt.Errorf("postgres %s needs `postgres: dedicated` in the header", arg(st, 0))
	}
	ctx, cancel := context.WithTimeout(r.ctx, 60*time.Second)
	defer cancel()
	p := r.pg.Provider
	var err error
	switch arg(st, 0) {
	case "stop":
		err = p.Stop(ctx)
	case "crash":
		err = p.Crash()
	case "start":
		if err = p.Start(ctx); err == nil {
			r.pgDown = false
			r.tl.add(laneDatabase, "postgres started on the same port")
			return r.awaitReady()
		}
	default:
		return fmt.Errorf("want: postgres stop|crash|start")
	}
	if err != nil {
		return err
	}
	r.pgDown = true
	r.tl.add(laneDatabase, "postgres "+map[string]string{"stop": "stopped (fast shutdown)", "crash": "crashed (SIGKILL)"}[arg(st, 0)])
	return nil
}

// awaitReady polls /readyz of every running gateway until it answers 200.
func (r *scRun) awaitReady() error {
	deadline := time.Now().Add(2 * r.timeout)
	for _, gw := range r.stacks {
		if gw.stopped {
			continue
		}
		probes := 0
		for {
			probes++
			req, _ := http.NewRequestWithContext(r.ctx, http.MethodGet, gw.baseURL()+"/readyz", nil)
			resp, err := r.httpc.Do(req)
			if err == nil {
				_ = resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s never became ready after the restart", gw.name)
			}
			time.Sleep(20 * time.Millisecond)
		}
		r.tl.add(laneGateway, fmt.Sprintf("%s /readyz 200 after %d probe(s)", gw.name, probes))
	}
	return nil
}

// cmdProxy resets every connection through the TCP proxy now.
// Example: proxy cut
func cmdProxy(r *scRun, st scStep) error {
	if r.proxy == nil || arg(st, 0) != "cut" {
		return fmt.Errorf("want: proxy cut, with `postgres: proxy` in the header")
	}
	r.cutProxy()
	return nil
}

// cmdDB makes the scenario's database answer as a standby does, or as a
// primary again: `db read-only` sets default_transaction_read_only for
// every new connection to it and resets every connection through the
// proxy, so the gateways' pools reconnect to a server that refuses every
// write with SQLSTATE 25006 (as a demoted primary, or a standby a proxy
// routed them to, does); `db writable` resets the setting, for new
// connections only: one opened meanwhile stays read-only, as a connection
// to a standby stays on the standby.
//
// `db standby-silent` (a dedicated cluster) names a synchronous standby
// that never connects (synchronous_standby_names), so every commit waits
// for a confirmation that does not come, as it does on a primary whose
// synchronous standby has not received its WAL; `db standby-awaited`
// waits until a commit waits so; `db standby-confirms` clears it, which
// releases the waiting commits.
// Example: db read-only
func cmdDB(r *scRun, st scStep) error {
	switch arg(st, 0) {
	case "standby-silent", "standby-confirms":
		return r.syncStandby(arg(st, 0) == "standby-silent")
	case "standby-awaited":
		return r.awaitSyncRep()
	}
	if r.proxy == nil {
		return fmt.Errorf("db %s needs `postgres: proxy` in the header", arg(st, 0))
	}
	var set string
	switch arg(st, 0) {
	case "read-only":
		set = "SET default_transaction_read_only = on"
	case "writable":
		set = "RESET default_transaction_read_only"
	default:
		return fmt.Errorf("want: db read-only|writable")
	}
	ctx, cancel := context.WithTimeout(r.ctx, r.timeout)
	defer cancel()
	u, err := url.Parse(r.dbURL)
	if err != nil {
		return err
	}
	sql := "ALTER DATABASE " + pgx.Identifier{strings.TrimPrefix(u.Path, "/")}.Sanitize() + " " + set
	if err := pgx.BeginTxFunc(ctx, r.observer, pgx.TxOptions{AccessMode: pgx.ReadWrite}, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, sql)
		return err
	}); err != nil {
		return fmt.Errorf("db %s: %w", arg(st, 0), err)
	}
	r.tl.add(laneDatabase, "database "+arg(st, 0)+" for new connections")
	if arg(st, 0) == "read-only" {
		r.cutProxy()
	}
	return nil
}

// syncStandby sets or clears a synchronous standby that never confirms,
// and waits until every backend of the cluster has reloaded its settings.
func (r *scRun) syncStandby(silent bool) error {
	if r.s.pg != "dedicated" {
		return fmt.Errorf("db standby-silent|standby-confirms needs `postgres: dedicated` in the header")
	}
	ctx, cancel := context.WithTimeout(r.ctx, r.timeout)
	defer cancel()
	sql := "ALTER SYSTEM RESET synchronous_standby_names"
	what := "synchronous standby confirms (none named)"
	if silent {
		sql = "ALTER SYSTEM SET synchronous_standby_names = 'rendermac_silent_standby'"
		what = "synchronous standby named that never confirms: commits wait"
	}
	for _, q := range []string{sql, "SELECT pg_reload_conf()"} {
		if _, err := r.observer.Exec(ctx, q); err != nil {
			return fmt.Errorf("db standby: %s: %w", q, err)
		}
	}
	// A backend rereads the settings when it next goes idle; the
	// gateways' pooled connections are idle, so a short settle covers
	// them (pg_reload_conf only signals).
	time.Sleep(300 * time.Millisecond)
	r.syncSilent = silent
	r.tl.add(laneDatabase, what)
	return nil
}

// awaitSyncRep waits until a backend of the dedicated cluster waits for
// the synchronous standby's confirmation of its commit (wait_event
// SyncRep): the commit is written on the primary and not acknowledged.
func (r *scRun) awaitSyncRep() error {
	if r.s.pg != "dedicated" {
		return fmt.Errorf("db standby-awaited needs `postgres: dedicated` in the header")
	}
	deadline := time.Now().Add(r.timeout)
	for {
		var n int
		if err := r.observer.QueryRow(r.ctx, `SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep'`).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			r.tl.add(laneDatabase, fmt.Sprintf("%d commit(s) wait for the synchronous standby", n))
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no commit waited for the synchronous standby within %s", r.timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// cmdPool warms a gateway's pool: N connections are acquired at once (so
// the pool opens that many) and released idle, as under load.
// Example: pool warm 8 gw1
func cmdPool(r *scRun, st scStep) error {
	n, err := strconv.Atoi(arg(st, 1))
	if arg(st, 0) != "warm" || err != nil || n < 1 {
		return fmt.Errorf("want: pool warm N [GATEWAY]")
	}
	name := arg(st, 2)
	if name == "" {
		name = "gw1"
	}
	gw, err := r.stack(name)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(r.ctx, r.timeout)
	defer cancel()
	conns := make([]*pgxpool.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Release()
		}
	}()
	for range n {
		c, err := gw.pool.Acquire(ctx)
		if err != nil {
			return fmt.Errorf("pool warm: %w", err)
		}
		conns = append(conns, c)
	}
	r.tl.add(laneDatabase, fmt.Sprintf("%s pool warmed to %d idle connection(s)", name, n))
	return nil
}

func (r *scRun) cutProxy() {
	n := r.proxy.Cut()
	r.count("proxy.resets", int64(n))
	r.tl.add(laneDatabase, fmt.Sprintf("TCP proxy reset %d pool connection(s)", n))
}

// cmdArm arms a server fault point, at its first hit: block (until
// `release`, or until the caller's context ends, e.g. its gateway is
// killed), cut-db (reset every pooled connection through the proxy), or
// cancel J (the buyer cancels J through the API, then the caller goes on).
// Example: arm commit.during_verify block
func cmdArm(r *scRun, st scStep) error {
	point, action := arg(st, 0), arg(st, 1)
	fired := func() { r.tl.add(laneGateway, "fault point "+point+" fired: "+action) }
	switch action {
	case "block":
		ch := make(chan struct{})
		r.mu.Lock()
		r.blocks[point] = ch
		r.mu.Unlock()
		r.fpArm(point, func(ctx context.Context) {
			fired()
			select {
			case <-ch:
			case <-ctx.Done():
			}
		}, true)
	case "cut-db":
		if r.proxy == nil {
			return fmt.Errorf("cut-db needs `postgres: proxy` in the header")
		}
		r.fpArm(point, func(context.Context) { fired(); r.cutProxy() }, true)
	case "cancel":
		id, err := r.jobID(arg(st, 2))
		if err != nil {
			return err
		}
		gw, err := r.stack(st.opt("via", "gw1"))
		if err != nil {
			return err
		}
		base := gw.baseURL()
		r.fpArm(point, func(context.Context) {
			fired()
			got, err := r.cancelJob(base, id)
			r.reply("cancel -> " + got)
			if err != nil {
				r.tl.add(laneGateway, "injected cancel failed: "+err.Error())
			}
		}, true)
	default:
		return fmt.Errorf("want: arm POINT block|cut-db|cancel JOB")
	}
	r.tl.add(laneGateway, "armed "+point+": "+strings.Join(st.args[1:], " "))
	return nil
}

// cmdAwait waits until a fault point has been hit n times (default 1);
// `await lock NAME` waits until a transaction waits on a row lock or the
// background operation NAME has finished (scenario_concurrent.go); `await
// log "TEXT" [gateway=G] [level=warn]` until a gateway (G, or any) logged a
// message holding TEXT at that level or above.
// Example: await commit.before_tx2
// Example: await log "session ended" gateway=gw1
func cmdAwait(r *scRun, st scStep) error {
	point := arg(st, 0)
	switch point {
	case "lock":
		return r.awaitLock(arg(st, 1))
	case "log":
		return r.awaitLog(st)
	}
	n, err := optInt(st, "n", 1)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(r.timeout)
	for r.fpHits(point) < int64(n) {
		if time.Now().After(deadline) {
			return fmt.Errorf("fault point %s was hit %d times, want %d", point, r.fpHits(point), n)
		}
		time.Sleep(2 * time.Millisecond)
	}
	return nil
}

// awaitLog is `await log "TEXT" [gateway=G] [level=warn]`: it waits until
// a gateway (G, or any) has logged a line whose message holds TEXT at that
// level or above, such as "session ended", which a gateway logs once the
// session can neither be offered into nor written to.
func (r *scRun) awaitLog(st scStep) error {
	text, gw := arg(st, 1), st.opt("gateway", "")
	if text == "" {
		return errors.New(`want: await log "TEXT" [gateway=G] [level=warn]`)
	}
	level := slog.LevelInfo
	if st.opt("level", "") == "warn" {
		level = slog.LevelWarn
	}
	deadline := time.Now().Add(r.timeout)
	for !r.logged(gw, text, level) {
		if time.Now().After(deadline) {
			return fmt.Errorf("no gateway logged %q within %v", text, r.timeout)
		}
		time.Sleep(2 * time.Millisecond)
	}
	r.tl.add(laneGateway, fmt.Sprintf("logged: %s", text))
	return nil
}

// cmdRelease lets a blocked fault point go; later hits pass through.
// Example: release commit.during_verify
func cmdRelease(r *scRun, st scStep) error {
	r.mu.Lock()
	ch, ok := r.blocks[arg(st, 0)]
	delete(r.blocks, arg(st, 0))
	r.mu.Unlock()
	if !ok {
		return fmt.Errorf("%s is not blocked", arg(st, 0))
	}
	close(ch)
	r.tl.add(laneGateway, "released "+arg(st, 0))
	return nil
}

func (r *scRun) releaseBlocks() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, ch := range r.blocks {
		close(ch)
		delete(r.blocks, k)
	}
}
