package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server"
	"github.com/rendermac/rendermac/server/api"
	"github.com/rendermac/rendermac/server/artifact"
	"github.com/rendermac/rendermac/server/gateway"
	"github.com/rendermac/rendermac/server/grant"
	"github.com/rendermac/rendermac/server/metrics"
	"github.com/rendermac/rendermac/server/store"
	"github.com/rendermac/rendermac/server/webhook"
)

// shutdownTimeout bounds the graceful part of a shutdown: sessions drain
// and in-flight requests finish, or are cut when it runs out.
const shutdownTimeout = 30 * time.Second

// heartbeatWindows is how many missed heartbeats make a device offline:
// 6 x the default 15s heartbeat is the service's default 90s window.
const heartbeatWindows = 6

type serverFlags struct {
	db, listen, artifacts, publicURL, keyFile, logLevel string
	leaseTTL, heartbeat                                 time.Duration
}

func runServer(ctx context.Context, args []string, _, stderr io.Writer) error {
	f, err := parseServerFlags(args, stderr)
	if err != nil {
		return err
	}
	log, err := newLogger(stderr, f.logLevel)
	if err != nil {
		return err
	}
	key, err := loadSigningKey(f.keyFile)
	if err != nil {
		return err
	}
	return serve(ctx, f, key, log, nil)
}

func parseServerFlags(args []string, stderr io.Writer) (serverFlags, error) {
	var f serverFlags
	set := newFlagSet("server", "--db URL --artifacts DIR --signing-key-file FILE [flags]", stderr)
	set.StringVar(&f.db, "db", os.Getenv("DATABASE_URL"), "Postgres URL (env DATABASE_URL)")
	set.StringVar(&f.listen, "listen", envOr("RENDERMAC_LISTEN", "127.0.0.1:8080"), "listen address (env RENDERMAC_LISTEN)")
	set.StringVar(&f.artifacts, "artifacts", os.Getenv("RENDERMAC_ARTIFACTS"), "artifact store directory (env RENDERMAC_ARTIFACTS)")
	set.StringVar(&f.publicURL, "public-url", os.Getenv("RENDERMAC_PUBLIC_URL"),
		"base URL devices and buyers reach this server at, for grant URLs (env RENDERMAC_PUBLIC_URL; default http://LISTEN)")
	set.StringVar(&f.keyFile, "signing-key-file", os.Getenv("RENDERMAC_SIGNING_KEY_FILE"),
		"grant and webhook signing key, mode 0600; make one with 'rendermac admin gen-key FILE' (env RENDERMAC_SIGNING_KEY_FILE)")
	set.StringVar(&f.logLevel, "log-level", envOr("RENDERMAC_LOG_LEVEL", "info"), "debug, info, warn or error (env RENDERMAC_LOG_LEVEL)")
	leaseTTL, err := envDuration("RENDERMAC_LEASE_TTL", server.DefaultLeaseTTL)
	if err != nil {
		return f, err
	}
	heartbeat, err := envDuration("RENDERMAC_HEARTBEAT", 15*time.Second)
	if err != nil {
		return f, err
	}
	set.DurationVar(&f.leaseTTL, "lease-ttl", leaseTTL, "lease lifetime between renewals (env RENDERMAC_LEASE_TTL)")
	set.DurationVar(&f.heartbeat, "heartbeat", heartbeat, "agent heartbeat interval announced in welcome (env RENDERMAC_HEARTBEAT)")
	if err := parseFlags(set, args); err != nil {
		return f, err
	}
	switch {
	case f.db == "":
		return f, usageError{"--db (or DATABASE_URL) is required"}
	case f.artifacts == "":
		return f, usageError{"--artifacts (or RENDERMAC_ARTIFACTS) is required"}
	case f.keyFile == "":
		return f, usageError{"--signing-key-file (or RENDERMAC_SIGNING_KEY_FILE) is required; create one with 'rendermac admin gen-key FILE'"}
	case f.leaseTTL <= 0 || f.heartbeat <= 0:
		return f, usageError{"--lease-ttl and --heartbeat must be positive"}
	case f.heartbeat >= f.leaseTTL:
		return f, usageError{fmt.Sprintf("--heartbeat %v must be shorter than --lease-ttl %v, or leases expire between heartbeats", f.heartbeat, f.leaseTTL)}
	}
	return f, nil
}

// stack is the running control plane, handed to serve's ready callback.
type stack struct {
	pool    *pgxpool.Pool
	svc     *server.Service
	baseURL string
}

// serve runs the control plane until ctx ends: migrations, then service,
// gateway, API and webhook deliverer on one listener. ready, when set, runs
// once the listener accepts connections; its error stops the server. On
// shutdown the device sessions drain first (gateway.Shutdown, since
// http.Server.Shutdown does not wait for upgraded connections), then
// in-flight requests finish, then the background loops stop.
func serve(ctx context.Context, f serverFlags, key []byte, log *slog.Logger, ready func(context.Context, *stack) error) error {
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	defer ln.Close()
	base := f.publicURL
	if base == "" {
		base = "http://" + ln.Addr().String()
	}
	signer, err := grant.NewSigner(key, base)
	if err != nil {
		return usageError{err.Error()}
	}
	if err := store.Migrate(ctx, f.db); err != nil {
		return err
	}
	pool, err := store.OpenPool(ctx, f.db)
	if err != nil {
		return err
	}
	defer pool.Close()
	fs, err := artifact.NewFS(f.artifacts)
	if err != nil {
		return err
	}
	defer fs.Close()
	ids := protocol.RandomIDs{Jobs: rand.Reader, Attempts: rand.Reader, Tokens: rand.Reader}
	svc := server.NewService(pool, fs, ids, server.Config{LeaseTTL: f.leaseTTL, HeartbeatWindow: heartbeatWindows * f.heartbeat})
	m := metrics.New()
	gw := gateway.New(svc, pool, signer, m, log, gateway.Config{LeaseTTL: f.leaseTTL, Heartbeat: f.heartbeat})
	deliverer, err := webhook.New(pool, key, m, log, webhook.Config{})
	if err != nil {
		return err
	}
	a := api.New(svc, pool, fs, signer, m, log, api.Config{Gateway: gw.Handler()})
	srv := &http.Server{
		Handler: a.Handler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		// No WriteTimeout: artifact transfers and WebSocket sessions are long.
	}
	p := &plane{log: log, srv: srv, ln: ln, gw: gw, deliverer: deliverer, stack: stack{pool: pool, svc: svc, baseURL: base}}
	log.Info("rendermac server listening", "addr", ln.Addr().String(), "public_url", base,
		"db", redactURL(f.db), "artifacts", f.artifacts, "lease_ttl", f.leaseTTL, "heartbeat", f.heartbeat)
	return p.run(ctx, ready)
}

// plane is the assembled control plane of one process.
type plane struct {
	log       *slog.Logger
	srv       *http.Server
	ln        net.Listener
	gw        *gateway.Gateway
	deliverer *webhook.Deliverer
	stack     stack
}

func (p *plane) run(ctx context.Context, ready func(context.Context, *stack) error) error {
	log, srv, gw := p.log, p.srv, p.gw
	// The loops outlive ctx until the HTTP side has shut down, so that
	// draining sessions still hear cancels.
	loops, stopLoops := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Go(func() { _ = gw.Run(loops) })
	wg.Go(func() { _ = p.deliverer.Run(loops) })
	served := make(chan error, 1)
	go func() { served <- srv.Serve(p.ln) }()

	var err error
	if ready != nil {
		err = ready(ctx, &p.stack)
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
	if serr := srv.Shutdown(sctx); serr != nil {
		log.Warn("requests did not finish in time", "err", serr)
	}
	stopLoops()
	wg.Wait()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// loadSigningKey reads the signing key, refusing a file that group or
// others may read: anyone with the key can forge grants and webhooks.
func loadSigningKey(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("signing key: %w", err)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("signing key %s has mode %04o, readable by group or others; run `chmod 600 %s`", path, perm, path)
	}
	key, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("signing key: %w", err)
	}
	if len(key) < grant.MinKeyBytes {
		return nil, fmt.Errorf("signing key %s is %d bytes, want at least %d; make one with 'rendermac admin gen-key FILE'",
			path, len(key), grant.MinKeyBytes)
	}
	return key, nil
}

func newLogger(w io.Writer, levelName string) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(levelName)); err != nil {
		return nil, usageError{fmt.Sprintf("--log-level %q: want debug, info, warn or error", levelName)}
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level})), nil
}

func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}

func envDuration(name string, fallback time.Duration) (time.Duration, error) {
	v := os.Getenv(name)
	if v == "" {
		return fallback, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, usageError{fmt.Sprintf("%s=%q: %v", name, v, err)}
	}
	return d, nil
}

// redactURL hides a database URL's password for the log.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" {
		return "(key=value DSN, not shown)" // it may hold password=...
	}
	return u.Redacted()
}
