// Package controlplane assembles the real control plane — the fenced
// service layer, the device WebSocket gateway, the buyer/operator HTTP API
// and the webhook deliverer — from one Config, so that `rendermac server`,
// `rendermac dev` and end-to-end tests run exactly the same wiring.
package controlplane

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/rendermac/rendermac/internal/clock"
	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/api"
	"github.com/rendermac/rendermac/server/artifact"
	"github.com/rendermac/rendermac/server/clientaddr"
	"github.com/rendermac/rendermac/server/console"
	"github.com/rendermac/rendermac/server/fencing"
	"github.com/rendermac/rendermac/server/gateway"
	"github.com/rendermac/rendermac/server/grant"
	"github.com/rendermac/rendermac/server/listener"
	"github.com/rendermac/rendermac/server/metrics"
	"github.com/rendermac/rendermac/server/probe"
	"github.com/rendermac/rendermac/server/ratelimit"
	"github.com/rendermac/rendermac/server/store"
	"github.com/rendermac/rendermac/server/telemetry"
	"github.com/rendermac/rendermac/server/webhook"
)

// shutdownTimeout bounds the graceful part of a shutdown: sessions drain
// and in-flight requests finish, or are cut when it runs out.
const shutdownTimeout = 30 * time.Second

// heartbeatWindows is how many missed heartbeats make a device offline:
// 6 x the default 15s heartbeat is the service's default 90s window.
const heartbeatWindows = 6

// Config is everything a control plane needs.
type Config struct {
	// Artifacts is a directory (the filesystem store) or s3://BUCKET/PREFIX
	// (the S3 store: agents move bytes to and from the bucket with
	// presigned grants; S3 tunes the endpoint and addressing).
	DB, Listen, Artifacts string
	// S3 is the S3 store's endpoint, addressing and credentials when
	// Artifacts is s3://...; Bucket and Prefix come from Artifacts, and
	// empty fields from the standard AWS environment.
	S3 artifact.S3Config
	// PublicURL is where devices and buyers reach this server (grant URLs);
	// default http://<listen address>.
	PublicURL  string
	SigningKey []byte
	// LeaseTTL and Heartbeat default to fencing.DefaultLeaseTTL and 15s.
	LeaseTTL, Heartbeat time.Duration
	// SweepInterval and PollInterval tune the gateway loops (0: defaults).
	SweepInterval, PollInterval time.Duration
	// RetainFinished, when positive, prunes finished jobs whose terminal
	// time is more than this long ago, with everything they own, every
	// PruneEvery (0: DefaultPruneEvery) and at start. Zero: nothing is
	// ever pruned by the server (docs/operators.md, "Retention").
	RetainFinished, PruneEvery time.Duration
	// Variant runs a deliberately broken service layer (harness only).
	Variant fencing.Variant
	// Clock is the gateway's, the API's and the deliverer's (nil:
	// clock.Real, so every decision takes the database clock).
	Clock clock.Clock
	Log   *slog.Logger
	// Limits are the abuse limits of the API and the gateway (zero rules:
	// the defaults of package ratelimit).
	Limits ratelimit.Limits
	// PairMaxGuesses is how many wrong guesses burn a pairing code (0:
	// api.DefaultPairMaxGuesses).
	PairMaxGuesses int
	// MaxUploadBytes and UploadTTL bound an uploaded input and its
	// upload_url (0: api.DefaultMaxUploadBytes, api.DefaultUploadTTL).
	MaxUploadBytes int64
	UploadTTL      time.Duration
	// MetricsListen, when set, serves GET /metrics there instead of on
	// Listen. MetricsTokenHash, when set, is api.HashSecret of the bearer
	// token /metrics requires (see api.Config).
	MetricsListen, MetricsTokenHash string
	// Services is the service catalogue (nil: protocol.Services), the
	// same the agents are given.
	Services []protocol.Service
	// FFprobe, when set, is the ffprobe binary verification runs on every
	// output whose service has a verification profile ("": the structural
	// walk alone).
	FFprobe string
	// Console configures the operators' web console at /console (cards
	// directory and renderers, whether non-loopback peers may reach it).
	Console console.Config
	// TLS is where the listeners' certificate comes from (files or ACME);
	// without one both listeners speak plain HTTP, which Run allows only on
	// loopback addresses unless InsecurePlaintext (SPEC section 6).
	TLS               listener.Options
	InsecurePlaintext bool
	// TrustedProxies are the reverse proxies whose X-Forwarded-For names
	// the client (package clientaddr).
	TrustedProxies clientaddr.Trusted
	// Getenv reads the OTEL_EXPORTER_OTLP_* endpoint that turns tracing on
	// (package telemetry); nil is os.Getenv.
	Getenv func(string) string
}

func (f *Config) defaults() error {
	if f.LeaseTTL == 0 {
		f.LeaseTTL = fencing.DefaultLeaseTTL
	}
	if f.Heartbeat == 0 {
		f.Heartbeat = 15 * time.Second
	}
	if f.Log == nil {
		f.Log = slog.New(slog.DiscardHandler)
	}
	switch {
	case f.DB == "" || f.Listen == "" || f.Artifacts == "":
		return errors.New("controlplane: DB, Listen and Artifacts are required")
	case len(f.SigningKey) < grant.MinKeyBytes:
		return fmt.Errorf("controlplane: signing key is %d bytes, want at least %d", len(f.SigningKey), grant.MinKeyBytes)
	case f.Heartbeat >= f.LeaseTTL:
		return fmt.Errorf("controlplane: heartbeat %v must be shorter than the lease TTL %v", f.Heartbeat, f.LeaseTTL)
	}
	return nil
}

// Plane is a running control plane, handed to Run's ready callback.
type Plane struct {
	Pool    *pgxpool.Pool
	Service *fencing.Service
	// Gateway is the device gateway (its Wakeups, for the bench).
	Gateway *gateway.Gateway
	// BaseURL is the public URL grants point at; Addr is the listen address;
	// MetricsAddr is the metrics listener's address, or "" without one.
	BaseURL, Addr, MetricsAddr string
	// Certs serves the listeners' certificate (nil: plain HTTP); Reload
	// it when the operator asks (SIGHUP).
	Certs *listener.Certs
}

// serve runs the control plane until ctx ends: migrations, then service,
// gateway, API and webhook deliverer on one listener. ready, when set, runs
// once the listener accepts connections; its error stops the server. On
// shutdown the device sessions drain first (gateway.Shutdown, since
// http.Server.Shutdown does not wait for upgraded connections), then
// in-flight requests finish, then the background loops stop.
// Run migrates the database, starts the HTTP API, the device gateway (with
// its listener, polling fallback and sweeper) and the webhook deliverer, calls
// ready once they serve, and runs until ctx ends; then it drains device
// sessions and HTTP requests and stops the loops.
func Run(ctx context.Context, f Config, ready func(context.Context, *Plane) error) error {
	if err := f.defaults(); err != nil {
		return err
	}
	log, key := f.Log, f.SigningKey
	certs, err := listener.New(f.TLS, log)
	if err != nil {
		return err
	}
	if certs == nil {
		if err := listener.CheckPlaintext("--listen", f.Listen, f.InsecurePlaintext); err != nil {
			return err
		}
		if f.MetricsListen != "" {
			if err := listener.CheckPlaintext("--metrics-listen", f.MetricsListen, f.InsecurePlaintext); err != nil {
				return err
			}
		}
	}
	ln, err := net.Listen("tcp", f.Listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	defer ln.Close()
	var metricsLn net.Listener
	if f.MetricsListen != "" {
		if metricsLn, err = net.Listen("tcp", f.MetricsListen); err != nil {
			return fmt.Errorf("metrics listen: %w", err)
		}
		defer metricsLn.Close()
	}
	base := f.PublicURL
	if base == "" {
		base = scheme(certs) + "://" + ln.Addr().String()
	}
	signer, err := grant.NewSigner(key, base)
	if err != nil {
		return err
	}
	if err := store.Migrate(ctx, f.DB); err != nil {
		return err
	}
	// Traces only when OTEL_EXPORTER_OTLP_ENDPOINT is set; off, tp is nil
	// and nothing below wraps or traces anything.
	getenv := f.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	tp, stopTraces, err := telemetry.FromEnv(ctx, getenv)
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := stopTraces(sctx); err != nil {
			log.Warn("flushing traces", "err", err)
		}
	}()
	pcfg, err := store.PoolConfig(f.DB)
	if err != nil {
		return err
	}
	if tp != nil {
		store.AlsoTrace(pcfg, telemetry.PgxTracer(tp))
	}
	pool, err := store.OpenPoolConfig(ctx, pcfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	fs, grants, closeStore, err := openArtifacts(ctx, f.Artifacts, f.S3, signer)
	if err != nil {
		return err
	}
	defer closeStore()
	as := Assemble(Parts{Pool: pool, Store: fs, Grants: grants, Signer: signer, Clock: f.Clock, Log: log,
		IDs: protocol.RandomIDs{Jobs: rand.Reader, Attempts: rand.Reader, Tokens: rand.Reader},
		Service: fencing.Config{LeaseTTL: f.LeaseTTL, HeartbeatWindow: heartbeatWindows * f.Heartbeat, Variant: f.Variant,
			Services: f.Services, Prober: prober(f.FFprobe)},
		Gateway: gateway.Config{LeaseTTL: f.LeaseTTL, Heartbeat: f.Heartbeat, SweepInterval: f.SweepInterval,
			PollInterval: f.PollInterval, Limits: f.Limits},
		API: api.Config{TrustedProxies: f.TrustedProxies, Limits: f.Limits, PairMaxGuesses: f.PairMaxGuesses, MetricsTokenHash: f.MetricsTokenHash,
			MaxUploadBytes: f.MaxUploadBytes, UploadTTL: f.UploadTTL,
			MetricsElsewhere: metricsLn != nil, Services: f.Services},
		Console: f.Console})
	svc, gw, a := as.Service, as.Gateway, as.API
	as.Metrics.RegisterDB(store.DBCounter(pool))
	as.Metrics.RegisterGauges(func(ctx context.Context) (metrics.Gauges, error) {
		// Zero unless the clock is pinned (nil is clock.Real): the
		// database's clock.
		g, err := store.ReadGauges(ctx, pool, clock.PinnedNow(f.Clock))
		return metrics.Gauges(g), err
	})
	deliverer, err := webhook.New(pool, key, as.Metrics, log, webhook.Config{Clock: f.Clock})
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler: traced(a.Handler(), tp), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		// No WriteTimeout: artifact transfers and WebSocket sessions are long.
	}
	p := &running{log: log, srv: srv, ln: ln, certs: certs, gw: gw, console: as.Console, deliverer: deliverer,
		plane: Plane{Pool: pool, Service: svc, Gateway: gw, BaseURL: base, Addr: ln.Addr().String(), Certs: certs}}
	if f.RetainFinished > 0 {
		clk := f.Clock
		if clk == nil {
			clk = clock.Real{}
		}
		every := f.PruneEvery
		if every <= 0 {
			every = DefaultPruneEvery
		}
		p.retain = &retention{retain: f.RetainFinished, every: every, clk: clk, log: log, prune: svc.PruneFinished,
			now: func(ctx context.Context) (time.Time, error) { return store.ResolveNow(ctx, pool, clock.PinnedNow(clk)) }}
	}
	metricsAt := p.serveMetrics(metricsLn, a, f.MetricsTokenHash != "")
	lim := f.Limits.WithDefaults()
	// The metrics token is logged only as whether there is one.
	log.Info("rendermac server listening", "addr", ln.Addr().String(), "public_url", base,
		"db", redactURL(f.DB), "artifacts", f.Artifacts, "lease_ttl", f.LeaseTTL, "heartbeat", f.Heartbeat,
		"metrics", metricsAt, "limit_pair_per_ip", lim.PairPerIP, "limit_auth_failures_per_ip", lim.AuthFailuresPerIP,
		"limit_jobs_per_buyer", lim.JobsPerBuyer, "limit_connects_per_ip", lim.ConnectsPerIP,
		"limit_connects_per_device", lim.ConnectsPerDevice,
		"console_remote", f.Console.Remote, "cards", f.Console.CardsDir, "transport", transport(f),
		"trusted_proxies", f.TrustedProxies.String(), "retain_finished", retainText(f.RetainFinished))
	return p.run(ctx, ready)
}

// openArtifacts opens the artifact store Artifacts names and the issuer of
// its grants: a directory is the filesystem store, whose grants are signed
// URLs this server's artifact handler serves; s3://BUCKET/PREFIX is the S3
// store, whose grants are presigned URLs of the bucket, checked with one
// request now so a wrong bucket or credential stops the start.
func openArtifacts(ctx context.Context, where string, s3cfg artifact.S3Config, signer *grant.Signer) (artifact.Store, grant.Issuer, func(), error) {
	if !strings.HasPrefix(where, "s3:") {
		fs, err := artifact.NewFS(where)
		if err != nil {
			return nil, nil, nil, err
		}
		return fs, signer, func() { _ = fs.Close() }, nil
	}
	loc, err := artifact.ParseS3URL(where)
	if err != nil {
		return nil, nil, nil, err
	}
	s3cfg.Bucket, s3cfg.Prefix = loc.Bucket, loc.Prefix
	st, err := artifact.NewS3(ctx, s3cfg)
	if err != nil {
		return nil, nil, nil, err
	}
	checkCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := st.Check(checkCtx); err != nil {
		return nil, nil, nil, fmt.Errorf("controlplane: artifacts %s: %w (check the bucket, AWS credentials and --s3-endpoint)", where, err)
	}
	return st, st, func() {}, nil
}

// OpenArtifactStore opens the artifact store where names (a directory or
// s3://BUCKET/PREFIX, as Config.Artifacts), for a process that only reads
// and deletes objects (`rendermac admin prune`); close releases it.
func OpenArtifactStore(ctx context.Context, where string, s3cfg artifact.S3Config) (st artifact.Store, close func(), err error) {
	st, _, close, err = openArtifacts(ctx, where, s3cfg, nil)
	return st, close, err
}

// serveMetrics prepares the metrics server on ln (nil: /metrics stays on
// the API listener) and says, for the log, where /metrics is answered.
func (p *running) serveMetrics(ln net.Listener, a *api.API, token bool) string {
	if ln == nil {
		if token {
			return "(on the API listener, bearer token)"
		}
		return "(on the API listener, loopback clients only)"
	}
	p.metricsLn = ln
	p.metricsSrv = &http.Server{Handler: a.MetricsHandler(), ReadHeaderTimeout: 10 * time.Second, WriteTimeout: time.Minute,
		ErrorLog: slog.NewLogLogger(p.log.Handler(), slog.LevelWarn)}
	p.plane.MetricsAddr = ln.Addr().String()
	return ln.Addr().String()
}

// plane is the assembled control plane of one process.
type running struct {
	log *slog.Logger
	srv *http.Server
	ln  net.Listener
	// certs secures both listeners (nil: plain HTTP).
	certs *listener.Certs
	// metricsSrv serves /metrics on metricsLn; both nil without one.
	metricsSrv *http.Server
	metricsLn  net.Listener
	gw         *gateway.Gateway
	console    *console.Console
	deliverer  *webhook.Deliverer
	// retain is the --retain-finished loop (nil: retention off).
	retain *retention
	plane  Plane
}

func (p *running) run(ctx context.Context, ready func(context.Context, *Plane) error) error {
	log, srv, gw := p.log, p.srv, p.gw
	// The loops outlive ctx until the HTTP side has shut down, so that
	// draining sessions still hear cancels.
	loops, stopLoops := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Go(func() { _ = gw.Run(loops) })
	wg.Go(func() { _ = p.deliverer.Run(loops) })
	if p.retain != nil {
		wg.Go(func() { p.retain.run(loops) })
	}
	served := make(chan error, 2)
	go func() { served <- listener.Serve(srv, p.ln, p.certs) }()
	if p.metricsSrv != nil {
		go func() {
			served <- fmt.Errorf("metrics listener: %w", listener.Serve(p.metricsSrv, p.metricsLn, p.certs))
		}()
	}

	var err error
	if ready != nil {
		err = ready(ctx, &p.plane)
	}
	if err == nil {
		select {
		case <-ctx.Done():
			log.Info("shutting down")
		case err = <-served:
			err = fmt.Errorf("serve: %w", err)
		}
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if gerr := gw.Shutdown(sctx); gerr != nil {
		log.Warn("device sessions did not drain in time", "err", gerr)
	}
	p.console.Shutdown() // its live streams would hold srv.Shutdown
	if serr := srv.Shutdown(sctx); serr != nil {
		log.Warn("requests did not finish in time", "err", serr)
	}
	if p.metricsSrv != nil {
		_ = p.metricsSrv.Shutdown(sctx)
	}
	stopLoops()
	wg.Wait()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// scheme is the listeners' URL scheme.
func scheme(certs *listener.Certs) string {
	if certs == nil {
		return "http"
	}
	return "https"
}

// transport says, for the log, how the listeners are secured.
func transport(f Config) string {
	switch {
	case f.TLS.CertFile != "":
		return "tls (certificate files " + f.TLS.CertFile + ", reloaded on change and SIGHUP)"
	case len(f.TLS.ACME.Domains) > 0:
		return "tls (ACME: " + strings.Join(f.TLS.ACME.Domains, ",") + ")"
	case f.InsecurePlaintext:
		return "plain HTTP (--insecure-plaintext)"
	}
	return "plain HTTP (loopback only)"
}

// traced wraps h in the API's spans when tracing is on (tp non-nil).
func traced(h http.Handler, tp *sdktrace.TracerProvider) http.Handler {
	if tp == nil {
		return h
	}
	return telemetry.Handler(h, tp)
}

// redactURL hides a database URL's password for the log.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" {
		return "(key=value DSN, not shown)" // it may hold password=...
	}
	return u.Redacted()
}

// prober is the ffprobe pass of verification, or nil for none.
func prober(path string) *probe.Prober {
	if path == "" {
		return nil
	}
	return &probe.Prober{Path: path}
}

// retainText says, for the log, what the server prunes.
func retainText(d time.Duration) string {
	if d <= 0 {
		return "off"
	}
	return d.String()
}
