package e2e

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/agent"
	"github.com/rendermac/rendermac/agent/runner"
	"github.com/rendermac/rendermac/client"
	"github.com/rendermac/rendermac/internal/localserver"
	"github.com/rendermac/rendermac/internal/mp4"
	"github.com/rendermac/rendermac/internal/pgprovider"
	"github.com/rendermac/rendermac/internal/s3provider"
	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/protocol/buyer"
	"github.com/rendermac/rendermac/server/api"
	"github.com/rendermac/rendermac/server/fencing"
	"github.com/rendermac/rendermac/server/store"
)

// envS3CommitBytes sets the output size TestBigOutputOnS3LeavesTheServerFlat
// commits (default s3CommitBytesDefault, at most 1 GiB: the synthetic
// service's bound). RENDERMAC_S3_COMMIT_BYTES=1073741824 is the 1 GiB run.
const (
	envS3CommitBytes     = "RENDERMAC_S3_COMMIT_BYTES"
	s3CommitBytesDefault = 64 << 20
)

// TestBigOutputOnS3LeavesTheServerFlat commits one large output through
// the agent, the gateway and the control plane on S3, with the control
// plane as a separate `rendermac server` process (built here), and reads
// that process's peak and current RSS (/proc/PID/status VmHWM, VmRSS)
// before and after: the agent PUTs the bytes to the bucket and
// verification streams them through a snapshot and a hash, so the peak
// may grow by far less than the output. It reports the upload time (the
// attempt's uploading -> committing) and the verification time
// (committing -> succeeded), and checks the bytes the buyer downloads.
func TestBigOutputOnS3LeavesTheServerFlat(t *testing.T) {
	size := s3CommitBytesDefault
	if v := os.Getenv(envS3CommitBytes); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(t, err, envS3CommitBytes)
		require.True(t, n >= 1 && n <= 1<<30, "%s=%d: want 1..1073741824", envS3CommitBytes, n)
		size = n
	}
	ctx := context.Background()
	b := s3provider.MustBucket(t)
	p := startServerProcess(t, []string{"--artifacts", "s3://" + b.Name + "/farm", "--s3-endpoint", b.Endpoint, "--s3-path-style"},
		"AWS_ACCESS_KEY_ID="+b.AccessKey, "AWS_SECRET_ACCESS_KEY="+b.SecretKey, "AWS_REGION="+b.Region)
	cmd, bc := p.cmd, p.buyer
	creds := p.pair(t, runner.ServiceSynthetic)
	runAgent(t, "agent", creds, agentOptions{})

	// A small job first, so the process has run every code path once and
	// the "before" reading is a warm server's.
	run := func(mdat int) buyer.JobDetail {
		t.Helper()
		params := map[string]string{"seed": "s3-big", "mdat_bytes": strconv.Itoa(mdat)}
		created, err := bc.Create(ctx, client.CreateRequest{Service: runner.ServiceSynthetic, Params: params})
		require.NoError(t, err)
		return p.waitSucceeded(t, created.Job.ID)
	}
	run(4096)
	before := procMemory(t, cmd.Process.Pid)

	start := time.Now()
	d := run(size)
	wall := time.Since(start)
	after := procMemory(t, cmd.Process.Pid)

	// The buyer's download (the sealed copy, from the bucket) is the file
	// the synthetic runner writes, hashed as it streams.
	want := sha256.New()
	fileBytes, err := mp4.WriteSynthetic(want, mp4.SyntheticParams{Seed: "s3-big", Timescale: 1000, Duration: 1000, MdatBytes: size, Track: true})
	require.NoError(t, err)
	require.Equal(t, hex.EncodeToString(want.Sum(nil)), d.Output.SHA256)
	require.Equal(t, fileBytes, d.Output.Bytes)
	got := sha256.New()
	n, err := bc.Download(ctx, d, got, nil) // the client checks size and SHA-256 against the job's output
	require.NoError(t, err, "the buyer downloads the verified bytes")
	require.Equal(t, fileBytes, n)
	require.Equal(t, d.Output.SHA256, hex.EncodeToString(got.Sum(nil)), "the buyer downloads the verified bytes")

	events, err := bc.AllEvents(ctx, d.ID)
	require.NoError(t, err)
	at := func(to protocol.AttemptStatus) time.Time {
		for _, e := range events {
			if e.Kind == "attempt" && e.ToStatus == string(to) {
				return e.At
			}
		}
		t.Fatalf("no attempt event to %s in %v", to, events)
		return time.Time{}
	}
	upload := at(protocol.AttemptCommitting).Sub(at(protocol.AttemptUploading))
	verify := at(protocol.AttemptSucceeded).Sub(at(protocol.AttemptCommitting))

	// Flat: the peak grew by less than half the output and at most 64 MiB;
	// a server that held the object (or read it through itself) grows by
	// at least its size.
	bound := min(int64(size)/2, 64<<20)
	grew := after.hwm - before.hwm
	t.Logf("output %d bytes through agent -> bucket, verified and sealed by `rendermac server` (pid %d): "+
		"upload %s, verification %s, job wall %s; server VmHWM %s -> %s (+%s), VmRSS %s -> %s",
		fileBytes, cmd.Process.Pid, upload.Round(time.Millisecond), verify.Round(time.Millisecond), wall.Round(time.Millisecond),
		mib(before.hwm), mib(after.hwm), mib(grew), mib(before.rss), mib(after.rss))
	require.Less(t, grew, bound, "the server's peak RSS grew by %s for a %s output", mib(grew), mib(int64(size)))
}

// serverProcess is a `rendermac server` process (the production binary)
// on a fresh database, with one buyer and its client.
type serverProcess struct {
	cmd    *exec.Cmd
	base   string
	client *http.Client
	pool   *pgxpool.Pool
	svc    *fencing.Service
	buyer  *client.Client
	apiKey string
	// log is the process's stderr; transport is how clients reach it.
	log       *logBuffer
	transport agent.Transport
	// addr is the listen address (the base URL's host may be a name).
	addr string
}

// startServerProcess starts `rendermac server` with storeArgs (its
// --artifacts and store flags) and env added to this process's, waits
// until it is ready and creates a buyer. It is stopped (SIGTERM) and the
// database's invariants checked when the test ends.
func startServerProcess(t *testing.T, storeArgs []string, env ...string) *serverProcess {
	return startServerProcessWith(t, serverProcessOptions{args: storeArgs, env: env, logLevel: "warn"})
}

// serverProcessOptions shape a server process: its flags beyond the
// database, listen address, public URL and key; its environment; its log
// level; and, for a TLS server (https), the CA its clients trust.
type serverProcessOptions struct {
	args, env []string
	logLevel  string
	https     bool
	caFile    string
	// host, when set, is the name in the base URL (an ACME certificate's),
	// which the clients dial at the loopback address the server listens on.
	host string
}

func startServerProcessWith(t *testing.T, o serverProcessOptions) *serverProcess {
	t.Helper()
	ctx := context.Background()
	bin := buildServerBinary(t)
	db := pgprovider.MustDatabase(t, templateName, store.Migrate)
	t.Cleanup(func() { requireInvariants(t, db) })
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "signing.key")
	key := make([]byte, 32)
	_, err := rand.Read(key)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(keyFile, key, 0o600))
	addr, err := localserver.FreeAddr()
	require.NoError(t, err)
	base := "http://" + addr
	if o.https {
		base = "https://" + addr
	}
	if o.host != "" {
		_, port, _ := net.SplitHostPort(addr)
		base = "https://" + net.JoinHostPort(o.host, port)
	}

	// The server as an operator runs it, credentials from the environment.
	// A verification deadline (the lease TTL) of 2 minutes covers hashing
	// a GiB on a loaded 2-core machine.
	args := append([]string{"server", "--db", db, "--listen", addr, "--public-url", base}, o.args...)
	cmd := exec.Command(bin, append(args, "--signing-key-file", keyFile, "--lease-ttl", "2m", "--heartbeat", "10s",
		"--log-level", o.logLevel)...)
	cmd.Env = append(os.Environ(), o.env...)
	log := newLogBuffer(t, "rendermac server")
	cmd.Stdout, cmd.Stderr = log, log
	require.NoError(t, cmd.Start())
	exited := make(chan struct{}) // closed once the process has been waited for
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(stopTimeout):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	tr := agent.Transport{CAFile: o.caFile}
	httpc, err := tr.Client()
	require.NoError(t, err)
	httpc.Timeout = 10 * time.Minute
	if o.host != "" {
		var d net.Dialer
		httpc.Transport.(*http.Transport).DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
			return d.DialContext(ctx, network, addr)
		}
	}
	t.Cleanup(httpc.CloseIdleConnections)
	waitServerReady(t, httpc, base, exited)

	pool, err := store.OpenPool(ctx, db)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	svc := fencing.NewService(pool, nil, protocol.RandomIDs{Jobs: rand.Reader, Attempts: rand.Reader, Tokens: rand.Reader}, fencing.Config{})
	buyerID := protocol.UUIDFrom(rand.Reader)
	require.NoError(t, svc.CreateBuyer(ctx, buyerID, "e2e buyer", buyerBalanceCents))
	apiKey, err := api.CreateAPIKey(ctx, pool, buyerID)
	require.NoError(t, err)
	b, err := client.New(base, apiKey, client.WithHTTPClient(httpc))
	require.NoError(t, err)
	return &serverProcess{cmd: cmd, base: base, client: httpc, pool: pool, svc: svc, log: log, transport: tr, addr: addr,
		buyer: b, apiKey: apiKey}
}

// pair pairs a device offering services and returns its credentials.
func (p *serverProcess) pair(t *testing.T, services ...string) agent.Credentials {
	t.Helper()
	ctx := context.Background()
	code, _, err := api.CreatePairingCode(ctx, p.pool, time.Time{}, 10*time.Minute)
	require.NoError(t, err)
	creds, err := agent.Pair(ctx, p.transport, p.base, code, "e2e-mac", services)
	require.NoError(t, err)
	return creds
}

// waitSucceeded polls the job until it is terminal (at most 10 minutes)
// and requires it succeeded.
func (p *serverProcess) waitSucceeded(t *testing.T, id string) buyer.JobDetail {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(10 * time.Minute)
	d, err := p.buyer.Get(ctx, id)
	require.NoError(t, err)
	for !d.Status.Terminal() {
		require.True(t, time.Now().Before(deadline), "job %s not terminal within 10m: %s", d.ID, describe(d))
		time.Sleep(100 * time.Millisecond)
		d, err = p.buyer.Get(ctx, d.ID)
		require.NoError(t, err)
	}
	require.Equal(t, protocol.JobSucceeded, d.Status, describe(d))
	return d
}

// procMem is a process's peak and current resident set, in bytes.
type procMem struct{ hwm, rss int64 }

// procMemory reads VmHWM and VmRSS from /proc/PID/status.
func procMemory(t *testing.T, pid int) procMem {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("no /proc/%d/status on this system: %v", pid, err) // Linux only; CI runs Linux
	}
	defer f.Close()
	var m procMem
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), ":")
		if !ok || (name != "VmHWM" && name != "VmRSS") {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(val), " kB"), 10, 64)
		require.NoError(t, err, "%s: %q", name, val)
		if name == "VmHWM" {
			m.hwm = kb << 10
		} else {
			m.rss = kb << 10
		}
	}
	require.NoError(t, sc.Err())
	require.Positive(t, m.hwm, "VmHWM in /proc/%d/status", pid)
	return m
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// buildServerBinary builds the production rendermac binary (no test tags)
// into a temp dir; RENDERMAC_BIN names an already built one instead.
func buildServerBinary(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("RENDERMAC_BIN"); bin != "" {
		return bin
	}
	bin := filepath.Join(t.TempDir(), "rendermac")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/rendermac")
	cmd.Dir = "../.." // the module root
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "build rendermac: %s", out)
	return bin
}

// waitServerReady polls /readyz until the server process answers 200.
func waitServerReady(t *testing.T, client *http.Client, base string, exited <-chan struct{}) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := client.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-exited:
			t.Fatalf("rendermac server exited before it was ready (its log is above)")
		default:
		}
		require.True(t, time.Now().Before(deadline), "rendermac server not ready within a minute: %v", err)
		time.Sleep(50 * time.Millisecond)
	}
}
