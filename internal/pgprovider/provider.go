package pgprovider

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// Kinds reported by [Provider.Kind].
const (
	KindEnv    = "env"
	KindLocal  = "local"
	KindDocker = "docker"
)

var (
	// ErrNotControllable is returned by Stop, Crash and Start when the
	// server is not owned by this process (env) or not managed that way
	// (docker): pretending to inject a fault there would make tests pass
	// for the wrong reason.
	ErrNotControllable = errors.New("pgprovider: server is not fault-controllable (only the local ephemeral cluster is)")

	// ErrNoPostgres is wrapped by Open's error when no source of
	// PostgreSQL is available.
	ErrNoPostgres = errors.New("pgprovider: no PostgreSQL available")
)

// Options tune Open. The zero value is what tests want.
type Options struct {
	// URL, if set, is used instead of DATABASE_URL.
	URL string
	// IgnoreEnv ignores DATABASE_URL, e.g. for tests that need a
	// fault-controllable cluster.
	IgnoreEnv bool
	// DisableLocal and DisableDocker skip those sources.
	DisableLocal  bool
	DisableDocker bool

	// BinDir forces the directory holding initdb and postgres.
	BinDir string
	// BaseDir is where the cluster's temp dir is created. Default: on
	// Linux, with Fsync off and TMPDIR unset, /dev/shm if it is a tmpfs
	// with >= 2GiB free (much faster clones); else os.TempDir(). As root,
	// /tmp replaces a dir the postgres user cannot reach.
	BaseDir string
	// Fsync turns fsync on (and drops initdb --no-sync). Off by default:
	// tests do not survive OS crashes anyway, and fsync dominates runtime.
	Fsync bool
	// StartTimeout bounds each local start (default 60s).
	StartTimeout time.Duration
	// Settings are extra server settings of the local cluster, each
	// "name=value" as postgres -c takes it (rendermac bench preloads
	// pg_stat_statements). Other sources ignore them.
	Settings []string

	// DockerImage defaults to "postgres:15".
	DockerImage string
}

// Provider is one PostgreSQL server plus the bookkeeping for templates and
// cloned databases. It is safe for concurrent use.
type Provider struct {
	kind     string
	adminURL string
	local    *cluster   // KindLocal only
	docker   *dockerPG  // KindDocker only
	closeMu  sync.Mutex // serialises Close
	closed   bool

	tag       string            // processTag and this Provider's number in the process
	tmplMu    sync.Mutex        // held while a template is created+migrated
	mu        sync.Mutex        // guards the maps below
	templates map[string]string // logical name -> physical database name
	created   map[string]bool   // databases to drop on Close (env only)
}

// Open returns a Provider from the first available source (see package
// doc). The error explains how to provide PostgreSQL when none is found.
func Open(ctx context.Context, opts Options) (*Provider, error) {
	url := opts.URL
	if url == "" && !opts.IgnoreEnv {
		url = os.Getenv("DATABASE_URL")
	}
	if url != "" {
		if err := ping(ctx, url); err != nil {
			// An explicit URL is a decision, not a hint: falling back to
			// another server would hide a broken configuration.
			return nil, fmt.Errorf("pgprovider: DATABASE_URL/Options.URL is set but unusable: %w", err)
		}
		return newProvider(KindEnv, url), nil
	}

	var reasons []string
	if opts.DisableLocal {
		reasons = append(reasons, "local: disabled by Options")
	} else {
		c, err := newCluster(ctx, opts)
		if err == nil {
			p := newProvider(KindLocal, c.url("postgres"))
			p.local = c
			return p, nil
		}
		reasons = append(reasons, "local: "+err.Error())
	}

	if opts.DisableDocker {
		reasons = append(reasons, "docker: disabled by Options")
	} else if err := dockerReachable(ctx); err != nil {
		reasons = append(reasons, "docker: engine not reachable: "+err.Error())
	} else {
		d, url, err := startDocker(ctx, opts)
		if err == nil {
			p := newProvider(KindDocker, url)
			p.docker = d
			return p, nil
		}
		reasons = append(reasons, "docker: "+err.Error())
	}

	msg := "provide PostgreSQL in one of these ways:\n" +
		"  1. set DATABASE_URL=postgres://user:pass@host:5432/db (the role needs CREATEDB; PostgreSQL 13+)\n" +
		"  2. install PostgreSQL 15 server binaries so initdb and postgres are on PATH or in /usr/lib/postgresql/15/bin\n" +
		"     (Debian/Ubuntu: apt-get install postgresql-15; macOS: brew install postgresql@15 and add its bin to PATH)\n" +
		"  3. run a Docker engine (`docker info` must succeed) so a postgres:15 container can be started\n" +
		"why each source failed:"
	for _, r := range reasons {
		msg += "\n  - " + r
	}
	return nil, fmt.Errorf("%w; %s", ErrNoPostgres, msg)
}

func newProvider(kind, adminURL string) *Provider {
	return &Provider{
		kind:      kind,
		adminURL:  adminURL,
		tag:       fmt.Sprintf("%s_%d", processTag, providerCounter.Add(1)),
		templates: map[string]string{},
		created:   map[string]bool{},
	}
}

// Kind is "env", "local" or "docker".
func (p *Provider) Kind() string { return p.kind }

// AdminURL connects as a superuser (local, docker) to the "postgres"
// database. In env mode it is DATABASE_URL exactly as given.
func (p *Provider) AdminURL() string { return p.adminURL }

// SocketURL is dbURL (a URL this Provider gave) over the local cluster's
// Unix-domain socket, for a client on this machine that sends many small
// statements: a round trip over the socket skips the kernel's TCP and IP
// layers (pgbench's SELECT 1 at 8 clients here: 52,000 transactions/s over
// 127.0.0.1, 61,000 over the socket). It is dbURL unchanged when there is
// no socket (not a local cluster, or a data directory whose socket path
// would be too long) or dbURL is not a URL. Callers that need a host and
// port (a TCP proxy in front of the database, say) keep dbURL.
func (p *Provider) SocketURL(dbURL string) string {
	if p.local == nil || p.local.sockDir == "" {
		return dbURL
	}
	u, err := url.Parse(dbURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return dbURL
	}
	q := u.Query()
	q.Set("host", p.local.sockDir)
	q.Set("port", strconv.Itoa(p.local.port))
	u.Host, u.RawQuery = "", q.Encode()
	return u.String()
}

// Version returns the server's server_version, e.g. "15.8 (Debian ...)".
func (p *Provider) Version(ctx context.Context) (string, error) {
	conn, err := pgx.Connect(ctx, p.adminURL)
	if err != nil {
		return "", fmt.Errorf("pgprovider: connect: %w", err)
	}
	defer conn.Close(context.Background())
	var v string
	if err := conn.QueryRow(ctx, "SHOW server_version").Scan(&v); err != nil {
		return "", fmt.Errorf("pgprovider: server_version: %w", err)
	}
	return v, nil
}

// Stop shuts the local cluster down with a fast shutdown (SIGINT): open
// sessions are terminated, committed data is flushed. Stopping a stopped
// cluster is a no-op.
func (p *Provider) Stop(ctx context.Context) error {
	if p.local == nil {
		return ErrNotControllable
	}
	return p.local.stop(ctx)
}

// Crash SIGKILLs the postmaster and its backends and waits for the
// postmaster to exit, like a power cut for the server process (the OS page
// cache survives). Crashing a stopped cluster is a no-op.
func (p *Provider) Crash() error {
	if p.local == nil {
		return ErrNotControllable
	}
	return p.local.crash()
}

// Start restarts the local cluster on the same data directory and port
// and waits until it accepts connections (after a Crash this includes
// crash recovery). Starting a running cluster is a no-op.
func (p *Provider) Start(ctx context.Context) error {
	if p.local == nil {
		return ErrNotControllable
	}
	return p.local.start(ctx)
}

// Close releases the server: the local cluster is stopped and its temp dir
// removed, the container is terminated, and in env mode the databases this
// Provider created are dropped. Close is idempotent.
func (p *Provider) Close() error {
	p.closeMu.Lock()
	defer p.closeMu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	switch {
	case p.local != nil:
		return p.local.close(ctx)
	case p.docker != nil:
		return p.docker.close(ctx)
	default:
		return p.dropCreated(ctx)
	}
}

// ping checks that url accepts connections and queries.
func ping(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	return conn.Ping(ctx)
}
