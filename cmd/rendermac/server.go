package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/rendermac/rendermac/harness/evidence"
	"github.com/rendermac/rendermac/internal/clock"
	"github.com/rendermac/rendermac/server/api"
	"github.com/rendermac/rendermac/server/artifact"
	"github.com/rendermac/rendermac/server/clientaddr"
	"github.com/rendermac/rendermac/server/console"
	"github.com/rendermac/rendermac/server/controlplane"
	"github.com/rendermac/rendermac/server/faultpoint"
	"github.com/rendermac/rendermac/server/fencing"
	"github.com/rendermac/rendermac/server/grant"
	"github.com/rendermac/rendermac/server/listener"
	"github.com/rendermac/rendermac/server/ratelimit"
)

type serverFlags struct {
	db, listen, artifacts, publicURL, keyFile, logLevel, logFormat string
	leaseTTL, heartbeat                                            time.Duration
	metricsListen, metricsTokenFile                                string
	limits                                                         ratelimit.Limits
	pairMaxGuesses                                                 int
	maxInputUploadBytes                                            int64
	inputUploadTTL                                                 time.Duration
	s3Endpoint                                                     string
	s3PathStyle                                                    bool
	catalogue, ffprobe                                             string
	cardsDir                                                       string
	consoleRemote                                                  bool
	tls                                                            listener.Options
	acmeDomains, stateDir, trustedProxies                          string
	insecurePlaintext                                              bool
	retainFinished, pruneEvery                                     time.Duration
	trusted                                                        clientaddr.Trusted
}

func runServer(ctx context.Context, args []string, _, stderr io.Writer) error {
	f, err := parseServerFlags(args, stderr)
	if err != nil {
		return err
	}
	log, err := newLogger(stderr, f.logLevel, f.logFormat)
	if err != nil {
		return err
	}
	key, err := loadSigningKey(f.keyFile)
	if err != nil {
		return err
	}
	metricsTokenHash, err := api.LoadMetricsToken(f.metricsTokenFile)
	if err != nil {
		return err
	}
	// Before anything runs: a fault armed late could miss its point, and a
	// binary that cannot arm one must not start as if it had.
	if err := faultpoint.EnableFromEnv(); err != nil {
		return err
	}
	if armed := faultpoint.Armed(); len(armed) > 0 {
		log.Warn("FAULT POINTS ARMED: this server will misbehave on purpose", "points", armed)
	}
	cfg := f.config(key, log)
	cfg.MetricsTokenHash = metricsTokenHash
	if cfg.Services, err = loadCatalogue(f.catalogue); err != nil {
		return err
	}
	if cfg.FFprobe, err = resolveFFprobe(f.ffprobe, log); err != nil {
		return err
	}
	return controlplane.Run(ctx, cfg, func(ctx context.Context, p *controlplane.Plane) error {
		go reloadOnHangup(ctx, p.Certs, log)
		return nil
	})
}

// reloadOnHangup re-reads the certificate files on each SIGHUP until ctx
// ends (certbot's deploy hook and cert-manager's sidecars send one); the
// files are also watched at every handshake, so the signal only hastens it.
func reloadOnHangup(ctx context.Context, certs *listener.Certs, log *slog.Logger) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			if certs == nil {
				log.Info("SIGHUP: no certificate files to reload")
			} else if err := certs.Reload(); err != nil {
				log.Warn("SIGHUP: certificate files do not load; still serving the previous certificate", "err", err)
			}
		}
	}
}

func parseServerFlags(args []string, stderr io.Writer) (serverFlags, error) {
	var f serverFlags
	set := newFlagSet("server", "--db URL --artifacts DIR --signing-key-file FILE [flags]", stderr)
	set.StringVar(&f.db, "db", os.Getenv("DATABASE_URL"), "Postgres URL (env DATABASE_URL)")
	set.StringVar(&f.listen, "listen", envOr("RENDERMAC_LISTEN", "127.0.0.1:8080"), "listen address (env RENDERMAC_LISTEN)")
	set.StringVar(&f.artifacts, "artifacts", os.Getenv("RENDERMAC_ARTIFACTS"),
		"artifact store: a directory, or s3://BUCKET/PREFIX for an S3-compatible bucket that agents reach with presigned URLs, credentials and region from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION (env RENDERMAC_ARTIFACTS)")
	set.StringVar(&f.s3Endpoint, "s3-endpoint", os.Getenv("RENDERMAC_S3_ENDPOINT"),
		"S3 endpoint URL for MinIO, R2, versitygw (env RENDERMAC_S3_ENDPOINT; AWS_ENDPOINT_URL_S3 is honoured too); devices must reach it, presigned URLs point there")
	set.BoolVar(&f.s3PathStyle, "s3-path-style", os.Getenv("RENDERMAC_S3_PATH_STYLE") == "1",
		"address the bucket as ENDPOINT/BUCKET/KEY, as MinIO and versitygw want (env RENDERMAC_S3_PATH_STYLE=1)")
	set.StringVar(&f.publicURL, "public-url", os.Getenv("RENDERMAC_PUBLIC_URL"),
		"base URL devices and buyers reach this server at, for grant URLs (env RENDERMAC_PUBLIC_URL; default http://LISTEN)")
	set.StringVar(&f.keyFile, "signing-key-file", os.Getenv("RENDERMAC_SIGNING_KEY_FILE"),
		"grant and webhook signing key, mode 0600; make one with 'rendermac admin gen-key FILE' (env RENDERMAC_SIGNING_KEY_FILE)")
	set.StringVar(&f.logLevel, "log-level", envOr("RENDERMAC_LOG_LEVEL", "info"), "debug, info, warn or error (env RENDERMAC_LOG_LEVEL)")
	set.StringVar(&f.logFormat, "log-format", envOr("RENDERMAC_LOG_FORMAT", "text"),
		"text (logfmt-like key=value lines) or json (one object a line, for journald, Loki, Cloud Logging) (env RENDERMAC_LOG_FORMAT)")
	leaseTTL, err := envDuration("RENDERMAC_LEASE_TTL", fencing.DefaultLeaseTTL)
	if err != nil {
		return f, err
	}
	heartbeat, err := envDuration("RENDERMAC_HEARTBEAT", 15*time.Second)
	if err != nil {
		return f, err
	}
	set.DurationVar(&f.leaseTTL, "lease-ttl", leaseTTL, "lease lifetime between renewals (env RENDERMAC_LEASE_TTL)")
	set.DurationVar(&f.heartbeat, "heartbeat", heartbeat, "agent heartbeat interval announced in welcome (env RENDERMAC_HEARTBEAT)")
	retain := envOr("RENDERMAC_RETAIN_FINISHED", "off")
	set.StringVar(&retain, "retain-finished", retain,
		"prune finished jobs whose terminal time is more than this long ago (90d, 36h), with their rows and stored objects, at start and every --prune-every; off (the default) never prunes (env RENDERMAC_RETAIN_FINISHED)")
	pruneEvery, err := envDuration("RENDERMAC_PRUNE_EVERY", controlplane.DefaultPruneEvery)
	if err != nil {
		return f, err
	}
	set.DurationVar(&f.pruneEvery, "prune-every", pruneEvery, "how often --retain-finished prunes (env RENDERMAC_PRUNE_EVERY)")
	set.StringVar(&f.metricsListen, "metrics-listen", os.Getenv("RENDERMAC_METRICS_LISTEN"),
		"serve /metrics on this address instead of --listen, to any peer there (env RENDERMAC_METRICS_LISTEN); without it /metrics on --listen answers loopback clients only, unless a token is set")
	set.StringVar(&f.metricsTokenFile, "metrics-token-file", os.Getenv("RENDERMAC_METRICS_TOKEN_FILE"),
		"file (mode 0600) holding the bearer token /metrics requires, from any peer (env RENDERMAC_METRICS_TOKEN_FILE)")
	set.StringVar(&f.catalogue, "catalogue", os.Getenv("RENDERMAC_CATALOGUE"),
		"service catalogue file (JSON, docs/SPEC.md \"Service catalogue\"), the same the agents are given (env RENDERMAC_CATALOGUE; default: the built-in services)")
	set.StringVar(&f.ffprobe, "ffprobe", envOr("RENDERMAC_FFPROBE", "auto"),
		"ffprobe binary for verification profiles: auto (ffprobe on PATH if there, with a warning if not), a path (required to run), or off (env RENDERMAC_FFPROBE)")
	set.StringVar(&f.cardsDir, "cards", os.Getenv("RENDERMAC_CARDS"),
		"directory of qualification cards (qualify --out) the console at /console lists, renders, diffs and stores uploads in (env RENDERMAC_CARDS)")
	set.BoolVar(&f.consoleRemote, "console-remote", os.Getenv("RENDERMAC_CONSOLE_REMOTE") == "1",
		"serve the console at /console to any peer (still behind an operator credential); without it only loopback peers reach it (env RENDERMAC_CONSOLE_REMOTE=1)")
	set.Int64Var(&f.maxInputUploadBytes, "max-input-upload-bytes", api.DefaultMaxUploadBytes,
		"largest input a buyer may upload (POST /v1/inputs) for a job; inline input_base64 stays at 32 MiB")
	set.DurationVar(&f.inputUploadTTL, "input-upload-ttl", api.DefaultUploadTTL,
		"lifetime of an input's upload_url (at most 168h)")
	set.IntVar(&f.pairMaxGuesses, "pair-max-guesses", api.DefaultPairMaxGuesses, "wrong guesses at a pairing code's id that burn the code")
	set.StringVar(&f.tls.CertFile, "tls-cert", os.Getenv("RENDERMAC_TLS_CERT"),
		"PEM certificate chain both listeners serve over TLS, reloaded when it or --tls-key changes and on SIGHUP (env RENDERMAC_TLS_CERT)")
	set.StringVar(&f.tls.KeyFile, "tls-key", os.Getenv("RENDERMAC_TLS_KEY"), "PEM private key of --tls-cert (env RENDERMAC_TLS_KEY)")
	set.StringVar(&f.acmeDomains, "acme-domain", os.Getenv("RENDERMAC_ACME_DOMAIN"),
		"comma-separated DNS names to obtain certificates for over ACME (TLS-ALPN-01 on this listener: the CA must reach it on port 443), "+
			"accepting the CA's terms (env RENDERMAC_ACME_DOMAIN)")
	set.StringVar(&f.tls.ACME.Email, "acme-email", os.Getenv("RENDERMAC_ACME_EMAIL"), "contact address of the ACME account (env RENDERMAC_ACME_EMAIL)")
	set.StringVar(&f.tls.ACME.DirectoryURL, "acme-ca", os.Getenv("RENDERMAC_ACME_CA"),
		"ACME directory URL of a staging or private CA (env RENDERMAC_ACME_CA; default Let's Encrypt)")
	set.StringVar(&f.tls.ACME.RootsFile, "acme-ca-root", os.Getenv("RENDERMAC_ACME_CA_ROOT"),
		"PEM root trusted, besides the system's, for --acme-ca's own HTTPS (env RENDERMAC_ACME_CA_ROOT)")
	set.StringVar(&f.stateDir, "state-dir", envOr("RENDERMAC_STATE_DIR", os.Getenv("STATE_DIRECTORY")),
		"directory the server keeps state in: the ACME account and certificates, under acme/ (env RENDERMAC_STATE_DIR, else systemd's STATE_DIRECTORY)")
	set.BoolVar(&f.insecurePlaintext, "insecure-plaintext", os.Getenv("RENDERMAC_INSECURE_PLAINTEXT") == "1",
		"serve plain HTTP on addresses that are not loopback, for a TLS-terminating proxy in front (env RENDERMAC_INSECURE_PLAINTEXT=1)")
	set.StringVar(&f.trustedProxies, "trusted-proxies", os.Getenv("RENDERMAC_TRUSTED_PROXIES"),
		"comma-separated CIDRs of reverse proxies whose X-Forwarded-For names the client for the abuse limits, logs and console (env RENDERMAC_TRUSTED_PROXIES)")
	f.limits = ratelimit.Limits{}.WithDefaults()
	for _, l := range []struct {
		name, what string
		rule       *ratelimit.Rule
	}{
		{"limit-pair-per-ip", "POST /v1/provider/pair requests per client IP", &f.limits.PairPerIP},
		{"limit-auth-failures-per-ip", "unknown or revoked API keys per client IP (then every keyed request from it waits)", &f.limits.AuthFailuresPerIP},
		{"limit-jobs-per-buyer", "POST /v1/jobs requests per buyer", &f.limits.JobsPerBuyer},
		{"limit-connects-per-ip", "device WebSocket connection attempts per client IP", &f.limits.ConnectsPerIP},
		{"limit-connects-per-device", "device WebSocket sessions (and so hellos) per device", &f.limits.ConnectsPerDevice},
	} {
		set.Var(l.rule, l.name, l.what+": N/DURATION (a burst of N, then N per DURATION) or off")
	}
	if err := parseFlags(set, args); err != nil {
		return f, err
	}
	if f.retainFinished, err = parseAge("--retain-finished", retain); err != nil {
		return f, err
	}
	if f.pruneEvery <= 0 {
		return f, usageError{fmt.Sprintf("--prune-every %v: want a positive duration", f.pruneEvery)}
	}
	if err := f.checkTransport(); err != nil {
		return f, err
	}
	switch {
	case f.db == "":
		return f, usageError{"--db (or DATABASE_URL) is required"}
	case f.artifacts == "":
		return f, usageError{"--artifacts (or RENDERMAC_ARTIFACTS) is required"}
	case !strings.HasPrefix(f.artifacts, "s3:") && (f.s3Endpoint != "" || f.s3PathStyle):
		return f, usageError{"--s3-endpoint and --s3-path-style apply only to --artifacts s3://BUCKET/PREFIX"}
	case strings.HasPrefix(f.artifacts, "s3:") && !validS3(f.artifacts):
		return f, usageError{fmt.Sprintf("--artifacts %q: want s3://BUCKET or s3://BUCKET/PREFIX", f.artifacts)}
	case f.keyFile == "":
		return f, usageError{"--signing-key-file (or RENDERMAC_SIGNING_KEY_FILE) is required; create one with 'rendermac admin gen-key FILE'"}
	case f.leaseTTL <= 0 || f.heartbeat <= 0:
		return f, usageError{"--lease-ttl and --heartbeat must be positive"}
	case f.maxInputUploadBytes <= 0:
		return f, usageError{"--max-input-upload-bytes must be positive"}
	case f.inputUploadTTL <= 0 || f.inputUploadTTL > api.MaxUploadTTL:
		return f, usageError{fmt.Sprintf("--input-upload-ttl %v: want more than 0 and at most %v", f.inputUploadTTL, api.MaxUploadTTL)}
	case f.pairMaxGuesses <= 0:
		return f, usageError{"--pair-max-guesses must be positive"}
	case f.cardsDir != "" && !isDir(f.cardsDir):
		return f, usageError{fmt.Sprintf("--cards %q is not a directory", f.cardsDir)}
	case f.heartbeat >= f.leaseTTL:
		return f, usageError{fmt.Sprintf("--heartbeat %v must be shorter than --lease-ttl %v, or leases expire between heartbeats", f.heartbeat, f.leaseTTL)}
	}
	return f, nil
}

// checkTransport reads the TLS, ACME and proxy flags into f.tls and
// f.trusted, and refuses plain HTTP on an address that is not loopback
// without --insecure-plaintext, as controlplane.Run does, so that a
// deployment's flags are judged before anything starts.
func (f *serverFlags) checkTransport() error {
	f.tls.ACME.Domains = splitList(f.acmeDomains)
	if len(f.tls.ACME.Domains) > 0 && f.stateDir != "" {
		f.tls.ACME.CacheDir = filepath.Join(f.stateDir, "acme")
	}
	if err := f.tls.Check(); err != nil {
		return usageError{err.Error()}
	}
	trusted, err := clientaddr.Parse(f.trustedProxies)
	if err != nil {
		return usageError{"--trusted-proxies: " + err.Error()}
	}
	f.trusted = trusted
	if f.tls.Enabled() {
		return nil
	}
	if err := listener.CheckPlaintext("--listen", f.listen, f.insecurePlaintext); err != nil {
		return usageError{err.Error()}
	}
	if f.metricsListen != "" {
		if err := listener.CheckPlaintext("--metrics-listen", f.metricsListen, f.insecurePlaintext); err != nil {
			return usageError{err.Error()}
		}
	}
	return nil
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

// newLogger builds the server's slog logger: level debug, info, warn or
// error; format text (slog's key=value lines) or json (one object a line).
func newLogger(w io.Writer, levelName, format string) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(levelName)); err != nil {
		return nil, usageError{fmt.Sprintf("--log-level %q: want debug, info, warn or error", levelName)}
	}
	opts := &slog.HandlerOptions{Level: level}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, usageError{fmt.Sprintf("--log-format %q: want text or json", format)}
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

func validS3(raw string) bool {
	_, err := artifact.ParseS3URL(raw)
	return err == nil
}

// config turns the flags into a control plane configuration.
func (f serverFlags) config(key []byte, log *slog.Logger) controlplane.Config {
	return controlplane.Config{DB: f.db, Listen: f.listen, Artifacts: f.artifacts, PublicURL: f.publicURL,
		SigningKey: key, LeaseTTL: f.leaseTTL, Heartbeat: f.heartbeat, Log: log, Clock: clock.Real{},
		Limits: f.limits, PairMaxGuesses: f.pairMaxGuesses, MetricsListen: f.metricsListen,
		MaxUploadBytes: f.maxInputUploadBytes, UploadTTL: f.inputUploadTTL,
		S3:      artifact.S3Config{Endpoint: f.s3Endpoint, PathStyle: f.s3PathStyle},
		Console: consoleConfig(f.cardsDir, f.consoleRemote),
		TLS:     f.tls, InsecurePlaintext: f.insecurePlaintext, TrustedProxies: f.trusted,
		RetainFinished: f.retainFinished, PruneEvery: f.pruneEvery}
}

// consoleConfig is the console's configuration: the cards directory, and
// package evidence's card renderer and diff, which the control plane may
// not import.
func consoleConfig(cardsDir string, remote bool) console.Config {
	return console.Config{CardsDir: cardsDir, Remote: remote, CardHTML: evidence.HTMLFromJSON, CardDiff: evidence.DiffJSON}
}

func isDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}

// resolveFFprobe turns --ffprobe into the binary verification runs, or ""
// for the structural walk alone.
func resolveFFprobe(flag string, log *slog.Logger) (string, error) {
	switch flag {
	case "off":
		log.Warn("--ffprobe off: outputs get the structural MP4 walk only; services' verification profiles are not checked")
		return "", nil
	case "auto", "":
		p, err := exec.LookPath("ffprobe")
		if err != nil {
			log.Warn("ffprobe not found on PATH: outputs get the structural MP4 walk only; install ffmpeg (or pass --ffprobe PATH) to check services' verification profiles")
			return "", nil
		}
		flag = p
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, flag, "-version").CombinedOutput(); err != nil {
		return "", fmt.Errorf("--ffprobe %s does not run (%v: %.200s); install ffmpeg, pass its ffprobe's path, or --ffprobe off", flag, err, out)
	}
	return flag, nil
}
