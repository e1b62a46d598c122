package api

import (
	"context"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rendermac/rendermac/internal/clock"
	"github.com/rendermac/rendermac/internal/dbstat"
	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/protocol/buyer"
	"github.com/rendermac/rendermac/server/artifact"
	"github.com/rendermac/rendermac/server/clientaddr"
	"github.com/rendermac/rendermac/server/fencing"
	"github.com/rendermac/rendermac/server/grant"
	"github.com/rendermac/rendermac/server/metrics"
	"github.com/rendermac/rendermac/server/ratelimit"
	"github.com/rendermac/rendermac/server/store"
)

// Defaults of Config.
const (
	// DefaultMaxInputBytes bounds a job's decoded input_base64.
	DefaultMaxInputBytes = 32 << 20
	// DefaultMaxArtifactBytes bounds one artifact PUT body (an output video).
	DefaultMaxArtifactBytes = 4 << 30
	// DefaultMaxUploadBytes bounds an uploaded input (POST /v1/inputs).
	DefaultMaxUploadBytes = 8 << 30
	// DefaultUploadTTL is how long an input's upload_url stays valid.
	DefaultUploadTTL = time.Hour
	// MaxUploadTTL bounds UploadTTL: a put grant is a bearer capability.
	MaxUploadTTL = 7 * 24 * time.Hour
	// DefaultDownloadTTL is how long a succeeded job's download_url stays valid.
	DefaultDownloadTTL = 15 * time.Minute
	// DefaultPairMaxGuesses is how many wrong guesses burn a pairing code.
	DefaultPairMaxGuesses = 5
)

// Config tunes an API. Zero fields take the defaults.
type Config struct {
	// TrustedProxies are the reverse proxies whose X-Forwarded-For names
	// the client (package clientaddr); the abuse limits, the loopback
	// checks and the request log then see that client. Empty: every
	// client is its TCP peer.
	TrustedProxies   clientaddr.Trusted
	MaxInputBytes    int64
	MaxArtifactBytes int64
	DownloadTTL      time.Duration
	// MaxUploadBytes bounds an uploaded input (default
	// DefaultMaxUploadBytes); UploadTTL is its upload_url's lifetime
	// (default DefaultUploadTTL, at most MaxUploadTTL).
	MaxUploadBytes int64
	UploadTTL      time.Duration
	// Grants issues download URLs (nil: signer, served by this API's
	// artifact handler; artifact.S3 for presigned URLs of the bucket).
	Grants grant.Issuer
	// Services is the catalogue a pairing device may offer; nil takes
	// protocol.Services. It must match the service layer's catalogue.
	Services []protocol.Service
	// Gateway, when set, serves GET /v1/provider/ws (the device WebSocket),
	// so that it is counted and logged like every other route.
	Gateway http.Handler
	// Clock, when pinned (tests and the harness pass a clock.Stub), is the
	// instant of every decision. Unpinned (nil is clock.Real), decisions
	// take the database clock, the single authority in production.
	Clock clock.Clock
	// Limits are the abuse limits on pairing, API-key failures and job
	// creation (zero rules: the defaults of package ratelimit).
	Limits ratelimit.Limits
	// PairMaxGuesses is how many wrong secrets a pairing code's id takes
	// before the code is burned (default DefaultPairMaxGuesses).
	PairMaxGuesses int
	// MetricsTokenHash, when set, is HashSecret of the bearer token that
	// GET /metrics requires; the plaintext is never held. Without it,
	// /metrics on the API's own listener answers loopback clients only.
	MetricsTokenHash string
	// MetricsElsewhere takes /metrics off the API's handler (404 there):
	// it is served by MetricsHandler on a listener of its own.
	MetricsElsewhere bool
	// Console, when set, serves /console and every path below it (the
	// operators' web console, package console, which does its own
	// authentication), counted and logged like every other route.
	Console http.Handler
}

// API serves the HTTP routes of SPEC section 6. It holds no per-request
// state and is safe for concurrent use.
type API struct {
	svc     *fencing.Service
	pool    *pgxpool.Pool
	store   artifact.Store
	signer  *grant.Signer
	metrics *metrics.Metrics
	log     *slog.Logger
	cfg     Config
	mux     *http.ServeMux
	// patterns are the mux's route patterns, in registration order.
	patterns []string
	limits   apiLimits
	clock    dbClock
}

// apiLimits are the API's per-key rate limiters.
type apiLimits struct {
	pair, authFailures, jobs *ratelimit.Keyed
}

// New returns the API over the service layer svc and its pool (the schema
// of store.Migrate, at least SchemaVersion), serving artifacts from st
// under grants signed by signer.
func New(svc *fencing.Service, pool *pgxpool.Pool, st artifact.Store, signer *grant.Signer, m *metrics.Metrics,
	log *slog.Logger, cfg Config) *API {
	if cfg.MaxInputBytes <= 0 {
		cfg.MaxInputBytes = DefaultMaxInputBytes
	}
	if cfg.MaxArtifactBytes <= 0 {
		cfg.MaxArtifactBytes = DefaultMaxArtifactBytes
	}
	if cfg.MaxUploadBytes <= 0 {
		cfg.MaxUploadBytes = DefaultMaxUploadBytes
	}
	if cfg.UploadTTL <= 0 {
		cfg.UploadTTL = DefaultUploadTTL
	}
	cfg.UploadTTL = min(cfg.UploadTTL, MaxUploadTTL)
	if cfg.Grants == nil {
		cfg.Grants = signer
	}
	if cfg.DownloadTTL <= 0 {
		cfg.DownloadTTL = DefaultDownloadTTL
	}
	if len(cfg.Services) == 0 {
		cfg.Services = protocol.Services
	}
	if cfg.PairMaxGuesses <= 0 {
		cfg.PairMaxGuesses = DefaultPairMaxGuesses
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	cfg.Limits = cfg.Limits.WithDefaults()
	a := &API{svc: svc, pool: pool, store: st, signer: signer, metrics: m, log: log, cfg: cfg, mux: http.NewServeMux(),
		limits: apiLimits{pair: cfg.Limits.Keyed(cfg.Limits.PairPerIP), authFailures: cfg.Limits.Keyed(cfg.Limits.AuthFailuresPerIP),
			jobs: cfg.Limits.Keyed(cfg.Limits.JobsPerBuyer)}}
	a.clock = dbClock{read: a.readDBClock, local: cfg.Clock.Now, maxAge: dbClockMaxAge}
	a.routes()
	return a
}

func (a *API) routes() {
	a.handle("GET /healthz", a.healthz)
	a.handle("GET /readyz", a.readyz)
	if !a.cfg.MetricsElsewhere {
		a.handle("GET /metrics", a.guardMetrics(a.cfg.MetricsTokenHash == "").ServeHTTP)
	}
	a.handle("POST /v1/inputs", a.buyer(a.createInput))
	a.handle("POST /v1/jobs", a.buyer(a.createJob))
	a.handle("GET /v1/jobs", a.buyer(a.listJobs))
	a.handle("GET /v1/jobs/{id}", a.buyer(a.getJob))
	a.handle("POST /v1/jobs/{id}/cancel", a.buyer(a.cancelJob))
	a.handle("GET /v1/jobs/{id}/events", a.buyer(a.jobEvents))
	a.handle("POST /v1/admin/services/{name}/pause", a.operator(a.pauseService))
	a.handle("POST /v1/admin/services/{name}/resume", a.operator(a.resumeService))
	a.handle("POST /v1/provider/pair", a.pair)
	a.handle("GET /v1/openapi.json", a.openAPI)
	if a.cfg.Gateway != nil {
		a.handle("GET /v1/provider/ws", a.cfg.Gateway.ServeHTTP)
	}
	if a.cfg.Console != nil {
		a.handle("/console", a.cfg.Console.ServeHTTP)
		a.handle("/console/", a.cfg.Console.ServeHTTP)
	}
	a.handle("/", a.noRoute)
}

// handle registers h for pattern on the mux and remembers the pattern.
func (a *API) handle(pattern string, h http.HandlerFunc) {
	a.patterns = append(a.patterns, pattern)
	a.mux.HandleFunc(pattern, h)
}

// Route labels of the artifact handler, which is dispatched before the mux.
const (
	routeArtifactGet   = "GET /v1/artifacts/{key...}"
	routeArtifactPut   = "PUT /v1/artifacts/{key...}"
	routeArtifactOther = "/v1/artifacts/{key...}"
)

// Handler returns the API's handler: every request is counted by route
// pattern and status, logged without secrets, and recovered from panics.
//
// Artifact paths bypass the ServeMux on purpose: the mux would answer a
// path containing ".." with a redirect to its cleaned form, so a crafted
// key would silently turn into another key. Here it reaches
// artifact.ValidateKey as sent and is refused with 400 invalid_key.
func (a *API) Handler() http.Handler {
	return a.cfg.TrustedProxies.Handler(a.instrument(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, grant.PathPrefix) {
			a.artifact(w, r)
			return
		}
		a.mux.ServeHTTP(w, r)
	})))
}

// noRoute answers the catch-all pattern: 405 when the path exists for
// another method, else 404, both as JSON rather than the mux's plain text.
func (a *API) noRoute(w http.ResponseWriter, r *http.Request) {
	var allowed []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete} {
		if m == r.Method {
			continue
		}
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := a.mux.Handler(probe); pattern != "" && pattern != "/" {
			allowed = append(allowed, m)
		}
	}
	if len(allowed) > 0 {
		slices.Sort(allowed)
		w.Header().Set("Allow", strings.Join(allowed, ", "))
		writeError(w, http.StatusMethodNotAllowed, buyer.CodeMethodNotAllowed, r.Method+" is not allowed here")
		return
	}
	writeError(w, http.StatusNotFound, string(protocol.CodeNotFound), "no such route")
}

// pinned is the instant handed to the service layer: the pinned clock's, or
// the zero time, which the service reads as "use the database clock".
func (a *API) pinned() time.Time { return clock.PinnedNow(a.cfg.Clock) }

// now is the instant of a decision the API takes itself (grant expiry,
// signing download grants): the pinned clock, or the database's, so that
// every process judges expiry by one clock. The database's is read at most
// once per dbClockMaxAge and carried forward in between (dbClock).
func (a *API) now(ctx context.Context) (time.Time, error) {
	if t := a.pinned(); !t.IsZero() {
		return t, nil
	}
	return a.clock.now(ctx)
}

// readDBClock reads the database's clock.
func (a *API) readDBClock(ctx context.Context) (time.Time, error) {
	return store.ResolveNow(dbstat.WithOp(ctx, "api_clock"), a.pool, time.Time{})
}

// Limit names, the label of metrics.RateLimited.
const (
	limitPair         = "pair_per_ip"
	limitAuthFailures = "auth_failures_per_ip"
	limitJobs         = "jobs_per_buyer"
)

// refuse answers 429 rate_limited for limit and counts it.
func (a *API) refuse(w http.ResponseWriter, limit, what string, wait time.Duration) {
	a.metrics.RateLimited.WithLabelValues(limit).Inc()
	ratelimit.Refuse(w, what, wait)
}

// internal answers 500 and logs the cause, which the client never sees.
func (a *API) internal(w http.ResponseWriter, r *http.Request, err error) {
	a.log.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	writeError(w, http.StatusInternalServerError, buyer.CodeInternal, "internal error")
}
