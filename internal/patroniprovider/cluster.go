package patroniprovider

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rendermac/rendermac/internal/localserver"
	"github.com/rendermac/rendermac/internal/pgprovider"
	"github.com/rendermac/rendermac/internal/tcpproxy"
)

// InstallCommand installs the tools Open needs (Debian).
const InstallCommand = "apt-get install patroni etcd-server"

// ErrNoPatroni is wrapped by Open's error when etcd, Patroni or the
// PostgreSQL server binaries are missing.
var ErrNoPatroni = errors.New("patroniprovider: etcd or patroni not found")

// Timings of the cluster. TTL is the leader key's lifetime: a killed
// leader is replaced about TTL after its last renewal. LoopWait and
// RetryTimeout keep Patroni's rule loop_wait + 2*retry_timeout <= ttl.
const (
	TTL          = 10
	loopWait     = 1
	retryTimeout = 4
	// Nodes is how many Postgres nodes a cluster has.
	Nodes = 3
	scope = "rendermac"
)

// Options tune Open. The zero value is the synchronous three-node cluster.
type Options struct {
	// BaseDir is where the cluster's temp dir is made (default /dev/shm
	// when it is a large tmpfs, else os.TempDir()).
	BaseDir string
	// Asynchronous turns Patroni's synchronous_mode off and lets a standby
	// of any lag be promoted (maximum_lag_on_failover 1 GiB): the
	// configuration that can lose an acknowledged commit.
	Asynchronous bool
	// ReplicationProxy puts a TCP proxy in front of every node for the
	// connections other nodes make to it (its connect_address): the
	// standbys' WAL streams, which HoldBack silences.
	ReplicationProxy bool
	// Log receives progress lines (nil: discarded).
	Log io.Writer
	// StartTimeout bounds Open's wait for a serving cluster (default 3m).
	StartTimeout time.Duration
}

// Cluster is one etcd and Nodes Patroni-managed Postgres nodes. It is safe
// for concurrent use.
type Cluster struct {
	opts    Options
	root    string
	bin     string // PostgreSQL's bin dir
	patroni string
	etcdBin string
	uid     int
	gid     int
	http    *http.Client

	etcd     *child
	etcdPort int
	nodes    []*node
}

// node is one Patroni process and the Postgres it manages.
type node struct {
	idx      int
	name     string
	dir      string // owned by the postgres account
	pgPort   int
	restPort int
	conf     string
	log      string
	proxy    *tcpproxy.Proxy // nil without Options.ReplicationProxy

	mu      sync.Mutex
	patroni *child // nil while killed
}

// Open starts etcd and Nodes Patroni nodes and returns once a leader takes
// writes and, in synchronous mode, a synchronous standby confirms them
// (WaitServing; the last node may still be cloning); Close ends it all.
func Open(ctx context.Context, opts Options) (*Cluster, error) {
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 3 * time.Minute
	}
	c := &Cluster{opts: opts, http: &http.Client{Timeout: 3 * time.Second}}
	var err error
	if c.patroni, err = exec.LookPath("patroni"); err != nil {
		return nil, fmt.Errorf("%w: patroni: install with `%s`", ErrNoPatroni, InstallCommand)
	}
	if c.etcdBin, err = exec.LookPath("etcd"); err != nil {
		return nil, fmt.Errorf("%w: etcd: install with `%s`", ErrNoPatroni, InstallCommand)
	}
	if c.bin, err = pgprovider.BinDir(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoPatroni, err)
	}
	if _, c.uid, c.gid, err = pgprovider.ServerProcAttr(); err != nil {
		return nil, err
	}
	base := opts.BaseDir
	if base == "" {
		base = baseDir()
	}
	cleanStale(base)
	if c.root, err = os.MkdirTemp(base, fmt.Sprintf("%s%d-", dirPrefix, os.Getpid())); err != nil {
		return nil, err
	}
	if err := os.Chmod(c.root, 0o755); err != nil {
		return nil, err
	}
	if err := c.start(ctx); err != nil {
		_ = c.Close()
		return nil, err
	}
	return c, nil
}

const dirPrefix = "patroni-"

func (c *Cluster) start(ctx context.Context) error {
	began := time.Now()
	if err := c.startEtcd(ctx); err != nil {
		return err
	}
	for i := range Nodes {
		n, err := c.newNode(i)
		if err != nil {
			return err
		}
		c.nodes = append(c.nodes, n)
	}
	for _, n := range c.nodes {
		if err := c.StartNode(n.idx); err != nil {
			return err
		}
	}
	wctx, cancel := context.WithTimeout(ctx, c.opts.StartTimeout)
	defer cancel()
	// Serving is what a caller needs first (a leader and, in synchronous
	// mode, a synchronous standby); the third node's clone may still be
	// running on a loaded machine, and WaitHealthy waits for it.
	if err := c.WaitServing(wctx); err != nil {
		return fmt.Errorf("patroni cluster did not come up: %w (logs in %s)", err, c.root)
	}
	fmt.Fprintf(c.opts.Log, "patroni: etcd and %d nodes serving in %s (synchronous %v, dir %s)\n", Nodes,
		time.Since(began).Round(time.Millisecond), !c.opts.Asynchronous, c.root)
	return nil
}

func (c *Cluster) startEtcd(ctx context.Context) error {
	cp, err := localserver.FreePort()
	if err != nil {
		return err
	}
	pp, err := localserver.FreePort()
	if err != nil {
		return err
	}
	c.etcdPort = cp
	client := fmt.Sprintf("http://127.0.0.1:%d", cp)
	peer := fmt.Sprintf("http://127.0.0.1:%d", pp)
	etcdDir := filepath.Join(c.root, "etcd")
	if err := c.ownedDir(etcdDir); err != nil {
		return err
	}
	c.etcd = &child{name: "etcd", log: filepath.Join(c.root, "etcd.log"), path: c.etcdBin, dir: etcdDir, args: []string{
		"--name", "e0", "--data-dir", filepath.Join(etcdDir, "data"),
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "e0=" + peer, "--initial-cluster-state", "new",
		"--enable-v2", "--logger", "zap", "--log-level", "warn"}}
	if err := c.etcd.start(nil); err != nil {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if c.get(ctx, client+"/health", nil) == nil {
			return nil
		}
		if c.etcd.exited() || time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("etcd did not answer on %s (log %s)", client, c.etcd.log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (c *Cluster) newNode(i int) (*node, error) {
	n := &node{idx: i, name: "pg" + strconv.Itoa(i), dir: filepath.Join(c.root, "pg"+strconv.Itoa(i))}
	var err error
	if n.pgPort, err = localserver.FreePort(); err != nil {
		return nil, err
	}
	if n.restPort, err = localserver.FreePort(); err != nil {
		return nil, err
	}
	if err := c.ownedDir(n.dir); err != nil {
		return nil, err
	}
	connect := fmt.Sprintf("127.0.0.1:%d", n.pgPort)
	if c.opts.ReplicationProxy {
		if n.proxy, err = tcpproxy.New(connect); err != nil {
			return nil, err
		}
		connect = n.proxy.Addr()
	}
	n.conf = filepath.Join(n.dir, "patroni.yml")
	n.log = filepath.Join(c.root, n.name+".log")
	if err := os.WriteFile(n.conf, []byte(c.config(n, connect)), 0o600); err != nil {
		return nil, err
	}
	if c.uid >= 0 {
		if err := os.Chown(n.conf, c.uid, c.gid); err != nil {
			return nil, fmt.Errorf("chown %s to postgres: %w", n.conf, err)
		}
	}
	return n, nil
}

// ownedDir makes dir, owned by the account the cluster's processes run as.
func (c *Cluster) ownedDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if c.uid >= 0 {
		if err := os.Chown(dir, c.uid, c.gid); err != nil {
			return fmt.Errorf("chown %s to postgres: %w", dir, err)
		}
	}
	return nil
}

// config is node n's patroni.yml. Every connection on loopback is trusted;
// fsync is off as in every cluster the harness runs (a SIGKILL of a
// process loses nothing the kernel was handed; the fault here is a dead
// process, not a dead machine).
func (c *Cluster) config(n *node, connect string) string {
	sync, lag := "true", 1<<20
	if c.opts.Asynchronous {
		sync, lag = "false", 1<<30
	}
	return fmt.Sprintf(`scope: %s
namespace: /rendermac/
name: %s
log:
  level: INFO
restapi:
  listen: 127.0.0.1:%d
  connect_address: 127.0.0.1:%d
etcd:
  host: 127.0.0.1:%d
bootstrap:
  dcs:
    ttl: %d
    loop_wait: %d
    retry_timeout: %d
    maximum_lag_on_failover: %d
    synchronous_mode: %s
    postgresql:
      use_pg_rewind: true
      use_slots: true
      parameters:
        max_connections: 300
        wal_level: replica
        hot_standby: 'on'
        wal_log_hints: 'on'
        max_wal_senders: 10
        max_replication_slots: 10
        wal_keep_size: 256MB
  initdb:
  - encoding: UTF8
  - locale: C
  - username: postgres
  pg_hba:
  - local all all trust
  - host all all 127.0.0.1/32 trust
  - host replication all 127.0.0.1/32 trust
postgresql:
  listen: 127.0.0.1:%d
  connect_address: %s
  data_dir: %s
  bin_dir: %s
  pgpass: %s
  use_unix_socket: false
  remove_data_directory_on_rewind_failure: true
  remove_data_directory_on_diverged_timelines: true
  authentication:
    superuser:
      username: postgres
      password: postgres
    replication:
      username: replicator
      password: replicator
    rewind:
      username: postgres
      password: postgres
  parameters:
    unix_socket_directories: '%s'
    fsync: 'off'
    shared_buffers: 32MB
    huge_pages: 'off'
  basebackup:
  - checkpoint: fast
`, scope, n.name, n.restPort, n.restPort, c.etcdPort, TTL, loopWait, retryTimeout, lag, sync,
		n.pgPort, connect, filepath.Join(n.dir, "data"), c.bin, filepath.Join(n.dir, "pgpass"), n.dir)
}

// URL is a connection URL for database db naming every node, which pgx
// tries in turn until one takes writes (target_session_attrs=read-write):
// what the control plane's --db is given.
func (c *Cluster) URL(db string) string {
	hosts := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		hosts[i] = fmt.Sprintf("127.0.0.1:%d", n.pgPort)
	}
	return fmt.Sprintf("postgres://postgres@%s/%s?sslmode=disable&target_session_attrs=read-write&connect_timeout=5",
		strings.Join(hosts, ","), db)
}

// NodeURL is a connection URL for database db on node i alone.
func (c *Cluster) NodeURL(i int, db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable&connect_timeout=5", c.nodes[i].pgPort, db)
}

// Dir is the cluster's directory (every process's log is there).
func (c *Cluster) Dir() string { return c.root }

// Name is node i's Patroni member name.
func (c *Cluster) Name(i int) string { return c.nodes[i].name }

// Close kills every process and removes the cluster's directory.
func (c *Cluster) Close() error {
	for _, n := range c.nodes {
		c.killNode(n)
		if n.proxy != nil {
			n.proxy.Close()
		}
	}
	if c.etcd != nil {
		c.etcd.kill()
	}
	c.http.CloseIdleConnections()
	if c.root == "" {
		return nil
	}
	return os.RemoveAll(c.root)
}
