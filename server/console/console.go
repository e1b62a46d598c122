package console

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rendermac/rendermac/internal/clock"
	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/api"
	"github.com/rendermac/rendermac/server/grant"
	"github.com/rendermac/rendermac/server/ratelimit"
	"github.com/rendermac/rendermac/server/store"
)

// Prefix is the console's path.
const Prefix = "/console"

// throughputWindow is how far back the queue page counts ended jobs.
const throughputWindow = 15 * time.Minute

// Config tunes a console. Zero fields take the defaults.
type Config struct {
	// Remote serves the console to any peer; otherwise only loopback
	// peers reach it (403 for others), like /metrics without a token.
	Remote bool
	// CardsDir is the directory of qualification cards (qualify's JSON
	// cards, YYYY-MM-DD-*.json) the cards page lists and uploads go to;
	// "" disables the cards pages.
	CardsDir string
	// CardHTML renders a JSON card as qualify's HTML card, and CardDiff
	// lists what changed between two JSON cards (package evidence's
	// writers and diff, which the control plane may not import: the
	// caller passes them). Nil: the cards page lists cards without them.
	CardHTML func(card []byte) ([]byte, error)
	CardDiff func(a, b []byte) ([]string, error)
	// Clock dates sessions and ages (nil: clock.Real).
	Clock clock.Clock
	// Limits.AuthFailuresPerIP bounds wrong credentials per client IP, as
	// for API keys (zero rules: the defaults).
	Limits ratelimit.Limits
	// Pauser pauses and resumes services for the services page (the
	// control plane's fenced service layer); nil: the page lists nothing
	// and offers no action.
	Pauser ServicePauser
	// Grants issues the job page's output download links (nil: the
	// signer's, the filesystem store's signed URLs), as for buyers.
	Grants grant.Issuer
	// DownloadTTL is how long such a link stays valid (0: 15 minutes).
	DownloadTTL time.Duration
	// Actions is the service layer the console's actions call (cancel,
	// drain, revoke); nil: their POSTs answer 503.
	Actions Actions
	// PollInterval is how often live updates look at the journal's head
	// (0: 500ms); notifications on the existing channels wake it at once.
	PollInterval time.Duration
}

// Console serves the console's routes. It is safe for concurrent use.
type Console struct {
	pool       *pgxpool.Pool
	log        *slog.Logger
	cfg        Config
	clock      clock.Clock
	sessionKey []byte
	csrfKey    []byte
	failures   *ratelimit.Keyed
	tmpl       map[string]*template.Template
	mux        *http.ServeMux
	hub        *hub

	shutdownOnce sync.Once
	shutdown     chan struct{}
}

//go:embed templates/*.html static/*
var files embed.FS

// New returns the console over pool, its sessions keyed by a key derived
// from signer's.
func New(pool *pgxpool.Pool, signer *grant.Signer, log *slog.Logger, cfg Config) *Console {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = 500 * time.Millisecond
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.Grants == nil {
		cfg.Grants = signer
	}
	if cfg.DownloadTTL <= 0 {
		cfg.DownloadTTL = api.DefaultDownloadTTL
	}
	lim := cfg.Limits.WithDefaults()
	c := &Console{pool: pool, log: log, cfg: cfg, clock: cfg.Clock, sessionKey: signer.DeriveKey(sessionPurpose),
		csrfKey:  signer.DeriveKey(csrfPurpose),
		failures: lim.Keyed(lim.AuthFailuresPerIP), tmpl: templates(), mux: http.NewServeMux(),
		shutdown: make(chan struct{})}
	c.hub = newHub(pool, log, cfg.PollInterval)
	c.routes()
	return c
}

func (c *Console) routes() {
	page := func(pattern string, h http.HandlerFunc) { c.mux.Handle(pattern, c.guard(h)) }
	c.mux.HandleFunc("GET "+Prefix+"/login", c.loginPage)
	c.mux.HandleFunc("POST "+Prefix+"/login", c.login)
	c.mux.HandleFunc("POST "+Prefix+"/logout", c.logout)
	c.mux.HandleFunc("GET "+Prefix+"/static/{name}", c.static)
	c.mux.Handle("GET "+Prefix, http.RedirectHandler(Prefix+"/", http.StatusMovedPermanently))
	page("GET "+Prefix+"/{$}", c.fleetPage)
	page("GET "+Prefix+"/queue", c.queuePage)
	page("GET "+Prefix+"/jobs", c.jobsPage)
	page("GET "+Prefix+"/jobs/{id}", c.jobPage)
	page("GET "+Prefix+"/cards", c.cardsPage)
	page("POST "+Prefix+"/cards", c.uploadCard)
	page("GET "+Prefix+"/cards/diff", c.cardDiffPage)
	page("GET "+Prefix+"/cards/{name}", c.cardPage)
	page("GET "+Prefix+"/cards/{name}/html", c.cardHTML)
	page("GET "+Prefix+"/events", c.events)
	c.serviceRoutes(page)
	page("GET "+Prefix+"/devices/{id}", c.devicePage)
	c.actionRoutes()
	c.mux.Handle(Prefix+"/", c.guard(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.refuse(w, r, http.StatusNotFound, "no such console page")
	})))
}

// Handler serves every path under Prefix.
func (c *Console) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		// The console's pages load only their own script and style, and
		// are never framed by another site.
		h.Set("Content-Security-Policy", "default-src 'self'; frame-ancestors 'self'; form-action 'self'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		c.mux.ServeHTTP(w, r)
	})
}

// Shutdown ends the live-update streams, which would otherwise keep an
// http.Server's graceful shutdown waiting; pages still answer.
func (c *Console) Shutdown() {
	c.shutdownOnce.Do(func() { close(c.shutdown) })
}

// view is what every page template gets.
type view struct {
	Title string
	Nav   string
	// Live is the events stream's query ("" : no live updates).
	Live    string
	Message string
	// Flash is the outcome of the action the page was redirected from.
	Flash string
	Data  any
}

var funcs = template.FuncMap{
	"ts": func(t any) string {
		switch v := t.(type) {
		case time.Time:
			return v.UTC().Format("2006-01-02 15:04:05.000Z")
		case *time.Time:
			if v == nil {
				return "—"
			}
			return v.UTC().Format("2006-01-02 15:04:05.000Z")
		}
		return fmt.Sprint(t)
	},
	"ago": func(now time.Time, t *time.Time) string {
		if t == nil {
			return "never"
		}
		return now.Sub(*t).Round(time.Second).String() + " ago"
	},
	"dur":   func(d time.Duration) string { return d.Round(time.Second).String() },
	"short": func(id string) string { return id[:min(8, len(id))] },
	"join":  strings.Join,
	"cents": func(c int64) string { return fmt.Sprintf("%d.%02d", c/100, c%100) },
	"q": func(kv ...string) template.URL {
		var b strings.Builder
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i+1] == "" {
				continue
			}
			if b.Len() > 0 {
				b.WriteByte('&')
			}
			b.WriteString(kv[i] + "=" + template.URLQueryEscaper(kv[i+1]))
		}
		return template.URL(b.String())
	},
}

// templates are the pages, parsed once per process: a parsed html/template
// may be executed by many goroutines at once, and parsing them for every
// Console cost the three-way campaign, which builds a stack per seed, 4% of
// its CPU.
var templates = sync.OnceValue(parseTemplates)

func parseTemplates() map[string]*template.Template {
	base := template.Must(template.New("layout.html").Funcs(funcs).ParseFS(files, "templates/layout.html"))
	out := map[string]*template.Template{}
	names, err := files.ReadDir("templates")
	if err != nil {
		panic(err)
	}
	for _, n := range names {
		if n.Name() == "layout.html" {
			continue
		}
		out[strings.TrimSuffix(n.Name(), ".html")] = template.Must(template.Must(base.Clone()).ParseFS(files, "templates/"+n.Name()))
	}
	return out
}

// render writes a page: the whole document, or only its <main> when the
// live script asks for a fragment (X-Console-Fragment).
func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name string, v view) {
	var buf bytes.Buffer
	root := "layout.html"
	if r.Header.Get("X-Console-Fragment") == "1" {
		root = "main"
	}
	if err := c.tmpl[name].ExecuteTemplate(&buf, root, v); err != nil {
		c.internal(w, r, fmt.Errorf("render %s: %w", name, err))
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// refuse answers an error: the login page (with the message) for 401, an
// error page otherwise; JSON for a client that asks for it.
func (c *Console) refuse(w http.ResponseWriter, r *http.Request, status int, message string) {
	c.refuseCode(w, r, status, "", message)
}

// refuseCode is refuse with an explicit JSON error code ("": the status's).
func (c *Console) refuseCode(w http.ResponseWriter, r *http.Request, status int, code, message string) {
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="rendermac console"`)
	}
	if wantsJSON(r) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		if code == "" {
			code = map[int]string{http.StatusUnauthorized: api.CodeUnauthorized, http.StatusForbidden: api.CodeForbidden,
				http.StatusNotFound: string(protocol.CodeNotFound)}[status]
		}
		if code == "" {
			code = "bad_request"
		}
		_ = json.NewEncoder(w).Encode(map[string]string{"code": code, "message": message})
		return
	}
	name := "error"
	if status == http.StatusUnauthorized {
		name = "login"
	}
	c.render(w, r, status, name, view{Title: http.StatusText(status), Message: message})
}

// downloadLink grants the job's output for a download, as the buyer's
// job view does: a GET grant of its output key, dated by the decision
// clock (the database's unless pinned).
func (c *Console) downloadLink(ctx context.Context, p *JobPage) error {
	now, err := store.ResolveNow(ctx, c.pool, clock.PinnedNow(c.cfg.Clock))
	if err != nil {
		return err
	}
	p.DownloadURL, err = c.cfg.Grants.Grant(ctx, grant.Get, p.OutputKey, now, c.cfg.DownloadTTL)
	if err != nil {
		return fmt.Errorf("download grant of %s: %w", p.Job.ID, err)
	}
	return nil
}

// wantsJSON reports whether the client asked for JSON answers.
func wantsJSON(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "application/json")
}

// internal answers 500 and logs the cause, which the page never shows.
func (c *Console) internal(w http.ResponseWriter, r *http.Request, err error) {
	c.log.ErrorContext(r.Context(), "console request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	c.render(w, r, http.StatusInternalServerError, "error", view{Title: "Internal error", Message: "internal error (logged)"})
}

// readTx runs fn in one read-only REPEATABLE READ snapshot, so that a
// page's parts agree with each other.
func (c *Console) readTx(ctx context.Context, fn func(pgx.Tx) error) error {
	return pgx.BeginTxFunc(ctx, c.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, fn)
}

func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	if !c.cfg.Remote && !api.FromLoopback(r) {
		c.refuse(w, r, http.StatusForbidden, "the console answers loopback clients only")
		return
	}
	c.render(w, r, http.StatusOK, "login", view{Title: "Log in"})
}

func (c *Console) static(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	b, err := files.ReadFile("static/" + name)
	if err != nil || strings.Contains(name, "/") {
		http.NotFound(w, r)
		return
	}
	switch {
	case strings.HasSuffix(name, ".js"):
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
	case strings.HasSuffix(name, ".css"):
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
	}
	w.Header().Set("Cache-Control", "max-age=300")
	_, _ = w.Write(b)
}

func (c *Console) fleetPage(w http.ResponseWriter, r *http.Request) {
	var f Fleet
	err := c.readTx(r.Context(), func(tx pgx.Tx) error {
		devs, err := api.ListDevices(r.Context(), c.pool)
		if err != nil {
			return err
		}
		ds := make([]Device, 0, len(devs))
		for _, d := range devs {
			ds = append(ds, Device{ID: d.ID, Name: d.Name, Status: d.Status, Services: d.Services, SlotsTotal: d.SlotsTotal,
				Live: d.LiveAttempts, LastSeen: d.LastSeenAt})
		}
		f, err = loadFleet(r.Context(), tx, ds)
		return err
	})
	if err != nil {
		c.internal(w, r, err)
		return
	}
	f.Now = c.clock.Now()
	c.render(w, r, http.StatusOK, "fleet", view{Title: "Fleet", Nav: "fleet", Live: "page=fleet", Data: f})
}

func (c *Console) queuePage(w http.ResponseWriter, r *http.Request) {
	now := c.clock.Now()
	g, err := store.ReadQueueGauges(r.Context(), c.pool, clock.PinnedNow(c.cfg.Clock))
	if err != nil {
		c.internal(w, r, err)
		return
	}
	q := Queue{Window: throughputWindow, Now: now}
	for _, s := range store.UnendedJobStatuses {
		q.JobsByStatus = append(q.JobsByStatus, StatusCount{Status: string(s), Count: g.JobsByStatus[string(s)]})
	}
	for svc, n := range g.QueuedByService {
		q.Services = append(q.Services, QueuedService{Service: svc, Queued: n,
			OldestAge: time.Duration(g.OldestQueuedAge[svc] * float64(time.Second))})
	}
	slices.SortFunc(q.Services, func(a, b QueuedService) int { return strings.Compare(a.Service, b.Service) })
	since := now.Add(-throughputWindow)
	if clock.PinnedNow(c.cfg.Clock).IsZero() {
		// The database's clock dates the journal: take its now.
		if dbNow, err := store.ResolveNow(r.Context(), c.pool, time.Time{}); err == nil {
			since = dbNow.Add(-throughputWindow)
		}
	}
	if q.Throughput, err = throughput(r.Context(), c.pool, since); err != nil {
		c.internal(w, r, err)
		return
	}
	c.render(w, r, http.StatusOK, "queue", view{Title: "Queue", Nav: "queue", Live: "page=queue", Data: q})
}

// jobsView is the jobs page.
type jobsView struct {
	Filter   JobFilter
	Jobs     []JobRow
	Next     string
	Statuses []protocol.JobStatus
	Services []protocol.Service
	Buyers   []Buyer
}

// parseJobFilter reads the jobs page's query, refusing values outside the
// contract's statuses and services and malformed ids or cursors.
func parseJobFilter(r *http.Request) (JobFilter, error) {
	q := r.URL.Query()
	f := JobFilter{Status: q.Get("status"), Service: q.Get("service"), Buyer: q.Get("buyer"), Limit: DefaultPageSize,
		Search: strings.ToLower(strings.TrimSpace(q.Get("q")))}
	if f.Search != "" {
		if _, _, ok := idRange(f.Search); !ok {
			return f, fmt.Errorf("search %q: want a job id or its start (hex digits and dashes)", f.Search)
		}
	}
	if f.Status != "" && !slices.Contains(protocol.JobStatuses, protocol.JobStatus(f.Status)) {
		return f, fmt.Errorf("status %q is not a job status", f.Status)
	}
	if f.Service != "" && !slices.ContainsFunc(protocol.Services, func(s protocol.Service) bool { return s.Name == f.Service }) {
		return f, fmt.Errorf("service %q is not in the catalogue", f.Service)
	}
	if f.Buyer != "" && !protocol.ValidID(f.Buyer) {
		return f, fmt.Errorf("buyer %q is not a buyer id", f.Buyer)
	}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxPageSize {
			return f, fmt.Errorf("limit %q: want 1..%d", s, MaxPageSize)
		}
		f.Limit = n
	}
	if s := q.Get("cursor"); s != "" {
		var err error
		if f.Before, err = ParseCursor(s); err != nil {
			return f, err
		}
	}
	return f, nil
}

func (c *Console) jobsPage(w http.ResponseWriter, r *http.Request) {
	f, err := parseJobFilter(r)
	if err != nil {
		c.refuse(w, r, http.StatusBadRequest, err.Error())
		return
	}
	v := jobsView{Filter: f, Statuses: protocol.JobStatuses, Services: protocol.Services}
	err = c.readTx(r.Context(), func(tx pgx.Tx) error {
		if f.Search != "" {
			v.Jobs, err = searchJobs(r.Context(), tx, f.Search)
		} else {
			v.Jobs, err = listJobs(r.Context(), tx, f)
		}
		if err != nil {
			return err
		}
		served, err := servedServices(r.Context(), tx)
		if err != nil {
			return err
		}
		markUnserved(v.Jobs, served)
		v.Buyers, err = listBuyers(r.Context(), tx)
		return err
	})
	if err != nil {
		c.internal(w, r, err)
		return
	}
	if f.Search != "" && len(v.Jobs) == 1 {
		// One job has that id or prefix: its page.
		http.Redirect(w, r, Prefix+"/jobs/"+v.Jobs[0].ID, http.StatusSeeOther)
		return
	}
	if f.Search == "" && len(v.Jobs) == f.Limit {
		v.Next = Cursor(v.Jobs[len(v.Jobs)-1])
	}
	c.render(w, r, http.StatusOK, "jobs", view{Title: "Jobs", Nav: "jobs", Live: "page=jobs", Data: v})
}

func (c *Console) jobPage(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var p JobPage
	err := c.readTx(r.Context(), func(tx pgx.Tx) error {
		var err error
		if p, err = loadJob(r.Context(), tx, id); err != nil {
			return err
		}
		if p.Job.Status != string(protocol.JobQueued) {
			return nil
		}
		served, err := servedServices(r.Context(), tx)
		p.Job.Unserved = !served[p.Job.Service]
		return err
	})
	if err == nil && p.Job.Status == string(protocol.JobSucceeded) && p.OutputKey != "" {
		err = c.downloadLink(r.Context(), &p)
	}
	switch {
	case errors.Is(err, errNoJob):
		c.refuse(w, r, http.StatusNotFound, "no job "+id)
		return
	case err != nil:
		c.internal(w, r, err)
		return
	}
	c.render(w, r, http.StatusOK, "job", view{Title: "Job " + id, Nav: "jobs", Live: "job=" + id, Flash: flash(r), Data: p})
}
