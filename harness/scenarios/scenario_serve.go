package scenarios

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/api"
	"github.com/rendermac/rendermac/server/clientaddr"
	"github.com/rendermac/rendermac/server/controlplane"
)

// Whole server processes in process (controlplane.Run, what `rendermac
// server` runs), on the run's database and pinned clock, for what only Run
// wires: the metrics listener and token, the gauges read from Postgres at
// each scrape, and OpenTelemetry traces exported over OTLP/HTTP to a
// receiver of the script's, which decodes every export itself.

func init() {
	for name, h := range map[string]scCommand{
		"serve": cmdServe, "metrics-token": cmdMetricsToken, "gauges": cmdGauges, "otlp": cmdOTLP,
	} {
		scCommands[name] = h
	}
}

// scServe is one controlplane.Run of the run.
type scServe struct {
	plane  *controlplane.Plane
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
	err    error
}

// stop ends Run (draining, and flushing its traces) and returns its error.
func (s *scServe) stop() error {
	s.once.Do(func() {
		s.cancel()
		s.err = <-s.done
	})
	return s.err
}

// cmdServe starts controlplane.Run as `rendermac server` would, on the
// run's database, artifacts directory, signing key, pinned clock, limits
// and trusted proxies, its gateway loops off (the script sweeps), until
// `serve stop`. metrics=listen adds --metrics-listen on a loopback port,
// token=NAME a --metrics-token-file of a fresh token (read back through
// api.LoadMetricsToken), otlp=R an OTLP endpoint at receiver R.
// Example: serve start s1 metrics=listen token=m1
// Example: serve start s2 otlp=o1
// Example: serve stop s2
func cmdServe(r *scRun, st scStep) error {
	o, name := r.opsState(), arg(st, 1)
	switch arg(st, 0) {
	case "stop":
		s := o.servers[name]
		if s == nil {
			return fmt.Errorf("serve stop: no server %q", name)
		}
		if err := s.stop(); err != nil {
			return fmt.Errorf("serve stop %s: %w", name, err)
		}
		r.tl.add(laneGateway, name+" stopped (sessions drained, traces flushed)")
		return nil
	case "start":
	case "":
		if st.opt("bucket", "") != "" {
			return cmdServeBucket(r, st) // scenario_serve_bucket.go
		}
		fallthrough
	default:
		return errors.New("want: serve start NAME [metrics=listen] [token=NAME] [otlp=R] | serve stop NAME | serve bucket=KIND -> started|refused")
	}
	if name == "" || o.servers[name] != nil {
		return errors.New("serve start: want a new server name")
	}
	trusted, err := clientaddr.Parse(r.s.proxies)
	if err != nil {
		return err
	}
	env := map[string]string{}
	if rc := st.opt("otlp", ""); rc != "" {
		if o.receivers[rc] == nil {
			return fmt.Errorf("serve start: no OTLP receiver %q (otlp start)", rc)
		}
		env["OTEL_EXPORTER_OTLP_ENDPOINT"] = o.receivers[rc].srv.URL
	}
	cfg := controlplane.Config{DB: r.dbURL, Listen: "127.0.0.1:0", Artifacts: r.dir, SigningKey: scSigningKey, Clock: r.clock,
		Log: slog.New(&scLogHandler{r: r, gateway: name}), PollInterval: -1, SweepInterval: -1, Limits: r.stackLimits(),
		TrustedProxies: trusted, Getenv: func(k string) string { return env[k] }}
	if st.opt("metrics", "") == "listen" {
		cfg.MetricsListen = "127.0.0.1:0"
	}
	if tok := st.opt("token", ""); tok != "" {
		path, token, err := r.writeMetricsToken(tok, 0o600)
		if err != nil {
			return err
		}
		if cfg.MetricsTokenHash, err = api.LoadMetricsToken(path); err != nil {
			return fmt.Errorf("serve start %s: %w", name, err)
		}
		o.tokens[tok] = token
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.ctx))
	s := &scServe{cancel: cancel, done: make(chan error, 1)}
	ready := make(chan *controlplane.Plane, 1)
	go func() {
		s.done <- controlplane.Run(ctx, cfg, func(ctx context.Context, p *controlplane.Plane) error {
			// Serving, and the gateway's listener has subscribed and
			// reconciled: its start-up statements ran, without a span.
			select {
			case <-p.Gateway.Listening():
			case <-ctx.Done():
			}
			ready <- p
			<-ctx.Done()
			return nil
		})
	}()
	select {
	case s.plane = <-ready:
	case err := <-s.done:
		cancel()
		return fmt.Errorf("serve start %s: %w", name, err)
	case <-time.After(r.timeout):
		cancel()
		return fmt.Errorf("serve start %s: not serving within %v", name, r.timeout)
	}
	o.servers[name] = s
	r.tl.add(laneGateway, fmt.Sprintf("%s: rendermac server in process at %s (metrics %s, otlp %s)", name, s.plane.Addr,
		orDash(s.plane.MetricsAddr), orDash(st.opt("otlp", ""))))
	return nil
}

// writeMetricsToken writes a fresh metrics token to a file of mode perm.
func (r *scRun) writeMetricsToken(name string, perm os.FileMode) (path, token string, err error) {
	token = "mt_" + randomB64(24)
	path = filepath.Join(r.dir, "metrics-token-"+name)
	if err := os.WriteFile(path, []byte(token+"\n"), perm); err != nil {
		return "", "", err
	}
	return path, token, os.Chmod(path, perm) // past the umask
}

// cmdMetricsToken writes a metrics token file of the mode given and reads
// it as `rendermac server --metrics-token-file` does: a file group or
// others can read is refused, naming its mode; otherwise only the token's
// hash comes back.
// Example: metrics-token t1 mode=0640 -> refused
// Example: metrics-token t2 mode=0600 -> hash
func cmdMetricsToken(r *scRun, st scStep) error {
	mode, err := strconv.ParseUint(st.opt("mode", "0600"), 8, 32)
	if err != nil || arg(st, 0) == "" {
		return errors.New("want: metrics-token NAME mode=OCTAL -> refused | hash")
	}
	path, token, err := r.writeMetricsToken(arg(st, 0), os.FileMode(mode))
	if err != nil {
		return err
	}
	r.opsState().tokens[arg(st, 0)] = token
	hash, err := api.LoadMetricsToken(path)
	r.tl.add(laneGateway, fmt.Sprintf("metrics token file of mode %04o: %v", mode, err))
	switch strings.Join(st.arrow, " ") {
	case "refused":
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%04o", mode)) {
			return fmt.Errorf("metrics token of mode %04o: %v, want it refused naming the mode", mode, err)
		}
		r.count("metrics.token.refused", 1)
		return nil
	case "hash":
		if err != nil || hash != api.HashSecret(token) {
			return fmt.Errorf("metrics token of mode %04o: %q, %v; want only the token's SHA-256 hex", mode, hash, err)
		}
		return nil
	}
	return errors.New("want: metrics-token NAME mode=OCTAL -> refused | hash")
}

// gaugeSample is one line of the Prometheus text format.
var gaugeSample = regexp.MustCompile(`(?m)^(rendermac_[a-z_]+)(\{[^}]*\})? (\S+)$`)

// gaugeFamilies are the scrape-time gauges (SPEC section 6).
var gaugeFamilies = []string{"rendermac_jobs", "rendermac_jobs_ended_estimate", "rendermac_queued_jobs", "rendermac_queued_oldest_age_seconds",
	"rendermac_devices_online", "rendermac_live_attempts"}

// cmdGauges scrapes /metrics of server S and compares every gauge with
// what the check counts itself in SQL at the decision instant: jobs by
// every status, queued jobs and the oldest one's age by service (only
// services with one), devices online, attempts in a live status, and
// rendermac_gauges_up 1. `-> down` first makes the gauges' read fail (the
// devices table is renamed away for the scrape) and wants
// rendermac_gauges_up 0 and no other gauge.
// Example: gauges s1
// Example: gauges s1 -> down
func cmdGauges(r *scRun, st scStep) error {
	s := r.opsState().servers[arg(st, 0)]
	if s == nil {
		return errors.New("want: gauges SERVER [-> down] (after serve start SERVER)")
	}
	down := strings.Join(st.arrow, " ") == "down"
	if down {
		if _, err := r.observer.Exec(r.ctx, `ALTER TABLE devices RENAME TO devices_away`); err != nil {
			return err
		}
	}
	// The ended jobs' gauge is the planner's estimate: after an ANALYZE
	// of a table this small (every page read) it is the exact count.
	if !down {
		if _, err := r.observer.Exec(r.ctx, `ANALYZE jobs`); err != nil {
			return err
		}
	}
	got, err := r.scrape("http://" + s.plane.Addr + "/metrics")
	if down {
		if _, rerr := r.observer.Exec(r.ctx, `ALTER TABLE devices_away RENAME TO devices`); rerr != nil {
			return errors.Join(err, rerr)
		}
	}
	if err != nil {
		return err
	}
	if down {
		var present []string
		for k := range got {
			if slices.Contains(gaugeFamilies, strings.SplitN(k, "{", 2)[0]) {
				present = append(present, k)
			}
		}
		if got["rendermac_gauges_up"] != 0 || len(present) > 0 {
			return fmt.Errorf("gauges after a failed read: rendermac_gauges_up %v (want 0), gauges still exported: %v", got["rendermac_gauges_up"], present)
		}
		r.tl.add(laneGateway, "gauges: the read failed: rendermac_gauges_up 0, no other gauge")
		r.count("gauges.down", 1)
		return nil
	}
	want, err := r.countGauges()
	if err != nil {
		return err
	}
	var diffs []string
	for k, v := range want {
		g, ok := got[k]
		if !ok || math.Abs(g-v) > 1e-6 {
			diffs = append(diffs, fmt.Sprintf("%s: exported %v (present %v), counted %v", k, g, ok, v))
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok && slices.Contains(gaugeFamilies, strings.SplitN(k, "{", 2)[0]) {
			diffs = append(diffs, fmt.Sprintf("%s: exported %v, nothing counted", k, got[k]))
		}
	}
	slices.Sort(diffs)
	r.tl.add(laneGateway, fmt.Sprintf("gauges of %s: %d samples compared with SQL, %d differ", arg(st, 0), len(want), len(diffs)))
	if len(diffs) > 0 {
		return fmt.Errorf("gauges differ from the database: %s", strings.Join(diffs, "; "))
	}
	r.count("gauges.compared", int64(len(want)))
	return nil
}

// scrape reads a /metrics page from loopback and returns its samples.
func (r *scRun) scrape(url string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(r.ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	rep, err := r.do(req, "")
	if err != nil {
		return nil, err
	}
	if rep.status != http.StatusOK {
		return nil, fmt.Errorf("scrape %s: %d %s", url, rep.status, trimBody(rep.body))
	}
	out := map[string]float64{}
	for _, m := range gaugeSample.FindAllStringSubmatch(string(rep.body), -1) {
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			return nil, fmt.Errorf("scrape %s: %q: %w", url, m[0], err)
		}
		out[m[1]+m[2]] = v
	}
	return out, nil
}

// countGauges is what the gauges must say, counted here in SQL of the
// check's own and dated at the pinned clock.
func (r *scRun) countGauges() (map[string]float64, error) {
	want := map[string]float64{"rendermac_gauges_up": 1}
	for _, s := range protocol.JobStatuses {
		var n int64
		if err := r.observer.QueryRow(r.ctx, `SELECT count(*) FROM jobs WHERE status = $1`, string(s)).Scan(&n); err != nil {
			return nil, err
		}
		if s.Terminal() {
			want["rendermac_jobs_ended_estimate"] += float64(n)
		} else {
			want[fmt.Sprintf(`rendermac_jobs{status=%q}`, s)] = float64(n)
		}
	}
	rows, err := r.observer.Query(r.ctx, `SELECT service, count(*), min(created_at) FROM jobs WHERE status = 'queued' GROUP BY service`)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var svc string
		var n int64
		var oldest time.Time
		if err := rows.Scan(&svc, &n, &oldest); err != nil {
			rows.Close()
			return nil, err
		}
		want[fmt.Sprintf(`rendermac_queued_jobs{service=%q}`, svc)] = float64(n)
		want[fmt.Sprintf(`rendermac_queued_oldest_age_seconds{service=%q}`, svc)] = r.clock.Now().Sub(oldest).Seconds()
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var live []string
	for _, s := range protocol.AttemptStatuses {
		if s.Live() {
			live = append(live, string(s))
		}
	}
	var online, attempts int64
	if err := r.observer.QueryRow(r.ctx, `SELECT (SELECT count(*) FROM devices WHERE status = 'online'),
	       (SELECT count(*) FROM job_attempts WHERE status = ANY($1::text[]))`, live).Scan(&online, &attempts); err != nil {
		return nil, err
	}
	want["rendermac_devices_online"], want["rendermac_live_attempts"] = float64(online), float64(attempts)
	return want, nil
}

// scOTLP is an OTLP/HTTP trace receiver written from the specification:
// POST /v1/traces, application/x-protobuf (gzip or not), an
// ExportTraceServiceRequest.
type scOTLP struct {
	srv *httptest.Server

	mu       sync.Mutex
	spans    []*tracepb.Span
	services []string // each span's resource service.name
	bad      []string
}

func (rc *scOTLP) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	data, err := io.ReadAll(io.LimitReader(body, 16<<20))
	var ex collectortrace.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(data, &ex)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if err != nil || req.Method != http.MethodPost || req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" {
		rc.bad = append(rc.bad, fmt.Sprintf("%s %s %s: %v", req.Method, req.URL.Path, req.Header.Get("Content-Type"), err))
		http.Error(w, "not an OTLP/HTTP trace export", http.StatusBadRequest)
		return
	}
	for _, rs := range ex.GetResourceSpans() {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				service = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				rc.spans = append(rc.spans, sp)
				rc.services = append(rc.services, service)
			}
		}
	}
	out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func spanAttr(sp *tracepb.Span, key string) string {
	for _, kv := range sp.GetAttributes() {
		if kv.GetKey() == key {
			return kv.GetValue().GetStringValue()
		}
	}
	return ""
}

func spanIntAttr(sp *tracepb.Span, key string) int64 {
	for _, kv := range sp.GetAttributes() {
		if kv.GetKey() == key {
			return kv.GetValue().GetIntValue()
		}
	}
	return 0
}

// dbSpanName is a database span's name (SPEC section 6).
var dbSpanName = regexp.MustCompile(`^postgresql [A-Z]+$`)

// cmdOTLP starts a receiver, or checks what it received (after `serve
// stop`, which flushes): for each request named, one server span of that
// name from service rendermac, with at least one client span under it in
// its trace, named `postgresql KEYWORD` with db.query.text (a batch:
// `postgresql batch` with db.operation.batch.size), db.system.name postgresql;
// no span of the device session route; no
// database span without a parent (the background loops make none); and
// every export well formed.
// Example: otlp start o1
// Example: otlp spans o1 "POST /v1/jobs" "GET /v1/jobs"
func cmdOTLP(r *scRun, st scStep) error {
	o, name := r.opsState(), arg(st, 1)
	switch arg(st, 0) {
	case "start":
		if name == "" || o.receivers[name] != nil {
			return errors.New("want: otlp start NEW-NAME")
		}
		rc := &scOTLP{}
		rc.srv = httptest.NewServer(rc)
		o.receivers[name] = rc
		return nil
	case "spans":
		rc := o.receivers[name]
		if rc == nil || len(st.args) < 3 {
			return errors.New("want: otlp spans R \"METHOD /path\" ... (after otlp start R)")
		}
		return r.checkSpans(rc, st.args[2:])
	}
	return errors.New("want: otlp start R | otlp spans R REQUEST...")
}

func (r *scRun) checkSpans(rc *scOTLP, requests []string) error {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var errs []error
	if len(rc.bad) > 0 {
		errs = append(errs, fmt.Errorf("malformed exports: %s", strings.Join(rc.bad, "; ")))
	}
	for _, want := range requests {
		var server *tracepb.Span
		for i, sp := range rc.spans {
			if sp.GetName() == want && sp.GetKind() == tracepb.Span_SPAN_KIND_SERVER && rc.services[i] == "rendermac" {
				server = sp
			}
		}
		if server == nil {
			errs = append(errs, fmt.Errorf("no server span %q of service rendermac among %d spans", want, len(rc.spans)))
			continue
		}
		children := 0
		for _, sp := range rc.spans {
			if !bytes.Equal(sp.GetTraceId(), server.GetTraceId()) || len(sp.GetParentSpanId()) == 0 || spanAttr(sp, "db.system.name") == "" {
				continue
			}
			batch := sp.GetName() == "postgresql batch"
			described := spanAttr(sp, "db.query.text") != ""
			if batch {
				described = spanIntAttr(sp, "db.operation.batch.size") > 0
			}
			if sp.GetKind() != tracepb.Span_SPAN_KIND_CLIENT || !(dbSpanName.MatchString(sp.GetName()) || batch) ||
				spanAttr(sp, "db.system.name") != "postgresql" || !described {
				errs = append(errs, fmt.Errorf("database span %q under %q: want a client span `postgresql KEYWORD` with db.query.text "+
					"(or `postgresql batch` with db.operation.batch.size), db.system.name postgresql", sp.GetName(), want))
			}
			children++
		}
		if children == 0 {
			errs = append(errs, fmt.Errorf("server span %q has no database span in its trace", want))
		}
	}
	for _, sp := range rc.spans {
		switch {
		case strings.Contains(sp.GetName(), "/v1/provider/ws"):
			errs = append(errs, fmt.Errorf("the device session route was traced: span %q", sp.GetName()))
		case len(sp.GetParentSpanId()) == 0 && spanAttr(sp, "db.system.name") != "":
			errs = append(errs, fmt.Errorf("a database span without a parent (a background loop's statement): %q %q", sp.GetName(), spanAttr(sp, "db.query.text")))
		}
	}
	r.tl.add(laneGateway, fmt.Sprintf("OTLP receiver: %d spans checked, %d problems", len(rc.spans), len(errs)))
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	r.count("otlp.spans", int64(len(rc.spans)))
	return nil
}
