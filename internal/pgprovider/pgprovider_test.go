package pgprovider

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if err := Shutdown(); err != nil {
		fmt.Fprintln(os.Stderr, "pgprovider.Shutdown:", err)
		code = 1
	}
	if code == 0 {
		// After Shutdown nothing of ours may be running: no reaper
		// goroutines for dead postmasters, no pgx connection watchers.
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

var migrateCalls atomic.Int32

func migrateItems(ctx context.Context, url string) error {
	migrateCalls.Add(1)
	return withConn(ctx, url, func(c *pgx.Conn) error {
		_, err := c.Exec(ctx, `CREATE TABLE items (id int PRIMARY KEY, v text);
			INSERT INTO items VALUES (1, 'seed')`)
		return err
	})
}

func withConn(ctx context.Context, url string, f func(*pgx.Conn) error) error {
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	return f(c)
}

func execSQL(t *testing.T, url, sql string, args ...any) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, withConn(ctx, url, func(c *pgx.Conn) error {
		_, err := c.Exec(ctx, sql, args...)
		return err
	}))
}

func count(t *testing.T, url string) int {
	t.Helper()
	ctx := context.Background()
	var n int
	require.NoError(t, withConn(ctx, url, func(c *pgx.Conn) error {
		return c.QueryRow(ctx, "SELECT count(*) FROM items").Scan(&n)
	}))
	return n
}

// itemsClone migrates template with the items table on p (once) and
// returns the URL of a fresh clone of it.
func itemsClone(t *testing.T, p *Provider, template string) string {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, p.Template(ctx, template, migrateItems))
	url, err := p.NewDatabase(ctx, template)
	require.NoError(t, err)
	return url
}

// openLocal opens a private, fault-controllable cluster; DATABASE_URL is
// ignored on purpose because fault tests need a server we own.
func openLocal(t *testing.T) *Provider {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, err := Open(ctx, Options{IgnoreEnv: true, DisableDocker: true})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Close()) })
	require.Equal(t, KindLocal, p.Kind())
	return p
}

func TestSharedTemplateClonesAreIndependent(t *testing.T) {
	ctx := context.Background()
	before := migrateCalls.Load()
	a := MustDatabase(t, "items_tmpl", migrateItems)
	b := MustDatabase(t, "items_tmpl", migrateItems)
	require.Equal(t, before+1, migrateCalls.Load(), "template must be migrated once")
	require.NotEqual(t, a, b)

	execSQL(t, a, "INSERT INTO items VALUES (2, 'only in a')")
	execSQL(t, b, "DELETE FROM items")
	require.Equal(t, 2, count(t, a))
	require.Equal(t, 0, count(t, b))

	p, err := Shared(ctx)
	require.NoError(t, err)
	c, err := p.NewDatabase(ctx, "items_tmpl")
	require.NoError(t, err)
	require.Equal(t, 1, count(t, c), "template must be untouched by its clones")
	require.NoError(t, p.DropDatabase(ctx, c))
	require.NoError(t, p.DropDatabase(ctx, c), "dropping twice is fine")

	v, err := p.Version(ctx)
	require.NoError(t, err)
	require.NotEmpty(t, v)
	t.Logf("kind=%s version=%s", p.Kind(), v)
}

func TestConcurrentClones(t *testing.T) {
	ctx := context.Background()
	_ = MustDatabase(t, "items_tmpl", migrateItems)
	p, err := Shared(ctx)
	require.NoError(t, err)
	var wg sync.WaitGroup
	urls := make([]string, 8)
	errs := make([]error, 8)
	for i := range urls {
		wg.Go(func() { urls[i], errs[i] = p.NewDatabase(ctx, "items_tmpl") })
	}
	wg.Wait()
	seen := map[string]bool{}
	for i, u := range urls {
		require.NoError(t, errs[i])
		require.False(t, seen[u], "duplicate URL %s", u)
		seen[u] = true
		require.Equal(t, 1, count(t, u))
		require.NoError(t, p.DropDatabase(ctx, u))
	}
}

func TestCrashThenStartKeepsURLAndData(t *testing.T) {
	ctx := context.Background()
	p := openLocal(t)
	url := itemsClone(t, p, "items_tmpl")
	execSQL(t, url, "INSERT INTO items VALUES (2, 'committed before crash')")

	// A CPU-bound query never checks for postmaster death; its backend
	// would hold shared memory and block the restart unless Crash kills it.
	held, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer held.Close(ctx)
	busy := make(chan error, 1)
	go func() {
		_, err := held.Exec(ctx, "SELECT count(*) FROM generate_series(1, 1e12)")
		busy <- err
	}()
	require.Eventually(t, func() bool {
		var n int
		_ = withConn(ctx, url, func(c *pgx.Conn) error {
			return c.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%generate_series(1, 1e12)%' AND pid <> pg_backend_pid()").Scan(&n)
		})
		return n == 1
	}, 10*time.Second, 10*time.Millisecond)

	require.NoError(t, p.Crash())
	require.NoError(t, p.Crash(), "crashing a dead server is a no-op")
	require.Error(t, <-busy, "sessions must not survive a crash")
	require.Error(t, withConn(ctx, url, func(*pgx.Conn) error { return nil }))

	require.NoError(t, p.Start(ctx))
	require.Equal(t, 2, count(t, url), "committed rows survive a crash")
	execSQL(t, url, "INSERT INTO items VALUES (3, 'after restart')")
	require.Equal(t, 3, count(t, url))
}

func TestStopStartAndCloseRemovesTempDir(t *testing.T) {
	ctx := context.Background()
	p := openLocal(t)
	url, err := p.NewDatabase(ctx, "template1")
	require.NoError(t, err)
	execSQL(t, url, "CREATE TABLE items (id int); INSERT INTO items VALUES (1)")

	require.NoError(t, p.Stop(ctx))
	require.NoError(t, p.Stop(ctx), "stopping a stopped server is a no-op")
	require.Error(t, withConn(ctx, url, func(*pgx.Conn) error { return nil }))
	require.NoError(t, p.Start(ctx))
	require.NoError(t, p.Start(ctx), "starting a running server is a no-op")
	require.Equal(t, 1, count(t, url))
	require.FileExists(t, filepath.Join(p.local.dataDir, fmt.Sprintf(".s.PGSQL.%d", p.local.port)))

	// A failed start says why, with the server log's tail.
	require.NoError(t, p.Stop(ctx))
	squat, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p.local.port))
	require.NoError(t, err)
	short, cancel := context.WithTimeout(ctx, time.Second)
	err = p.Start(short)
	cancel()
	require.ErrorContains(t, err, "could not bind")
	require.NoError(t, squat.Close())
	require.NoError(t, p.Start(ctx))
	require.Equal(t, 1, count(t, url))

	root := p.local.root
	require.DirExists(t, root)
	require.NoError(t, p.Close())
	require.NoDirExists(t, root)
	require.NoError(t, p.Close(), "Close is idempotent")
	require.Error(t, withConn(ctx, url, func(*pgx.Conn) error { return nil }))
	require.Error(t, p.Start(ctx), "a closed cluster cannot be restarted")
}

func TestEnvModeIsNotControllableAndCleansUp(t *testing.T) {
	ctx := context.Background()
	_ = MustDatabase(t, "items_tmpl", migrateItems) // make sure Shared is up
	host, err := Shared(ctx)
	require.NoError(t, err)

	p, err := Open(ctx, Options{URL: host.AdminURL()})
	require.NoError(t, err)
	require.Equal(t, KindEnv, p.Kind())
	require.ErrorIs(t, p.Stop(ctx), ErrNotControllable)
	require.ErrorIs(t, p.Crash(), ErrNotControllable)
	require.ErrorIs(t, p.Start(ctx), ErrNotControllable)

	url := itemsClone(t, p, "env_tmpl")
	require.Equal(t, 1, count(t, url))

	cfg, err := pgconn.ParseConfig(url)
	require.NoError(t, err)
	ours := func() int {
		var n int
		require.NoError(t, withConn(ctx, host.AdminURL(), func(c *pgx.Conn) error {
			return c.QueryRow(ctx, `SELECT count(*) FROM pg_database
				WHERE datname LIKE 'env\_tmpl\_%' OR datname = $1`,
				cfg.Database).Scan(&n)
		}))
		return n
	}
	require.Equal(t, 2, ours(), "per-process template and clone exist")
	require.NoError(t, p.Close())
	require.Equal(t, 0, ours(), "Close drops what an env Provider created")
}

func TestNoPostgresExplainsHowToProvideIt(t *testing.T) {
	_, err := Open(context.Background(), Options{IgnoreEnv: true, DisableLocal: true, DisableDocker: true})
	require.ErrorIs(t, err, ErrNoPostgres)
	for _, want := range []string{"DATABASE_URL", "CREATEDB", "postgresql-15", "/usr/lib/postgresql", "Docker"} {
		require.Contains(t, err.Error(), want)
	}
}

// fakeTB records Fatalf and unwinds like testing.T does (via panic here,
// Goexit there).
type fakeTB struct{ fatal string }

func (f *fakeTB) Helper()                        {}
func (f *fakeTB) Cleanup(func())                 {}
func (f *fakeTB) Logf(string, ...any)            {}
func (f *fakeTB) Fatalf(format string, a ...any) { f.fatal = fmt.Sprintf(format, a...); panic(f) }

func TestMustDatabaseFailsInsteadOfSkipping(t *testing.T) {
	defer shared.Set(nil, fmt.Errorf("%w; set DATABASE_URL", ErrNoPostgres))()

	tb := &fakeTB{}
	func() {
		defer func() { require.Equal(t, tb, recover()) }()
		MustDatabase(tb, "items_tmpl", migrateItems)
	}()
	require.Contains(t, tb.fatal, "set DATABASE_URL")
}

func TestDropDatabaseRefusesForeignDatabases(t *testing.T) {
	p, err := Shared(context.Background())
	require.NoError(t, err)
	require.ErrorContains(t, p.DropDatabase(context.Background(), p.AdminURL()), "refusing")
}

func TestWithDatabase(t *testing.T) {
	require.Equal(t, "postgres://u:p@h:1/x?sslmode=disable", withDatabase("postgres://u:p@h:1/postgres?sslmode=disable", "x"))
	require.Equal(t, "postgresql://h/x", withDatabase("postgresql://h", "x"))
	require.Equal(t, "host=h dbname=postgres dbname=x", withDatabase("host=h dbname=postgres", "x"))
}

// TestSocketURLReachesTheSameDatabaseOverTheSocket: the socket form of a
// clone's URL connects to that clone, over the Unix-domain socket
// (inet_server_addr is NULL there), and DropDatabase takes it; a provider
// without a local cluster gives URLs back unchanged.
func TestSocketURLReachesTheSameDatabaseOverTheSocket(t *testing.T) {
	ctx := context.Background()
	p := openLocal(t)
	tcp := itemsClone(t, p, "sock_tmpl")
	sock := p.SocketURL(tcp)
	require.NotEqual(t, tcp, sock)
	execSQL(t, sock, "INSERT INTO items VALUES (2, 'over the socket')")
	require.Equal(t, 2, count(t, tcp), "the socket URL names the same database")
	over := func(u string) (unix bool) {
		require.NoError(t, withConn(ctx, u, func(c *pgx.Conn) error {
			return c.QueryRow(ctx, "SELECT inet_server_addr() IS NULL").Scan(&unix)
		}))
		return unix
	}
	require.True(t, over(sock), "the socket URL connects over the Unix-domain socket")
	require.False(t, over(tcp), "the URL NewDatabase gave stays on TCP")
	require.NoError(t, p.DropDatabase(ctx, sock))
	require.Error(t, withConn(ctx, tcp, func(*pgx.Conn) error { return nil }), "dropped through its socket URL")

	env, err := Open(ctx, Options{URL: p.AdminURL()})
	require.NoError(t, err)
	defer env.Close()
	require.Equal(t, p.AdminURL(), env.SocketURL(p.AdminURL()), "no local cluster: no socket")
	require.Equal(t, "host=h dbname=x", p.SocketURL("host=h dbname=x"), "not a URL: unchanged")
}
