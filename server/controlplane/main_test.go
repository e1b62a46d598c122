package controlplane_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/harness/deviceclient"
	"github.com/rendermac/rendermac/internal/pgprovider"
	"github.com/rendermac/rendermac/internal/pgtest"
	"github.com/rendermac/rendermac/internal/syncbuf"
	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/protocol/buyer"
	"github.com/rendermac/rendermac/server/api"
	"github.com/rendermac/rendermac/server/faultpoint"
	"github.com/rendermac/rendermac/server/fencing"
	"github.com/rendermac/rendermac/server/grant"
	"github.com/rendermac/rendermac/server/store"
)

// These tests run `rendermac server` as real processes (built once, with
// -tags faultpoints, so a fault can be armed through the environment) on a
// fresh database each, and drive them as buyer and device over HTTP and
// WebSockets, the way production traffic arrives.

const (
	templateName = "rendermac_controlplane"
	service      = "synthetic.mp4"
	price        = 10 // synthetic.mp4's price in protocol.Services
	openingCents = 1000
	leaseTTL     = 3 * time.Second
	heartbeat    = time.Second
	// waitFor bounds every wait for a process or a state; generous, because
	// the machine is shared.
	waitFor = 30 * time.Second
)

var services = []string{service}

// binDir holds the binary built by rendermacBinary; TestMain removes it.
var binDir string

func TestMain(m *testing.M) {
	var err error
	if binDir, err = os.MkdirTemp("", "rendermac-controlplane-test-"); err != nil {
		fmt.Fprintln(os.Stderr, "temp dir:", err)
		os.Exit(1)
	}
	code := pgtest.Run(m, nil)
	_ = os.RemoveAll(binDir)
	os.Exit(code)
}

var build struct {
	once sync.Once
	path string
	err  error
}

// rendermacBinary builds ./cmd/rendermac with -tags faultpoints once per
// test binary and returns its path.
func rendermacBinary(t *testing.T) string {
	t.Helper()
	build.once.Do(func() {
		goTool := "go"
		if root := os.Getenv("GOROOT"); root != "" {
			goTool = filepath.Join(root, "bin", "go")
		}
		mod, err := exec.Command(goTool, "env", "GOMOD").Output()
		if err != nil || strings.TrimSpace(string(mod)) == "" {
			build.err = fmt.Errorf("go env GOMOD: %v", err)
			return
		}
		path := filepath.Join(binDir, "rendermac")
		cmd := exec.Command(goTool, "build", "-tags", "faultpoints", "-o", path, "./cmd/rendermac")
		cmd.Dir = filepath.Dir(strings.TrimSpace(string(mod)))
		start := time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			build.err = fmt.Errorf("go build -tags faultpoints ./cmd/rendermac: %v\n%s", err, out)
			return
		}
		fmt.Fprintf(os.Stderr, "built %s in %v\n", path, time.Since(start).Round(time.Millisecond))
		build.path = path
	})
	if build.err != nil {
		t.Fatal(build.err)
	}
	return build.path
}

// world is one test's database, artifact directory, signing key and buyer,
// shared by every server process the test starts.
type world struct {
	// env is added to every server's environment (after serverEnv).
	env                         []string
	bin, db, artifacts, keyFile string
	pool                        *pgxpool.Pool
	buyerID, apiKey             string
	client                      *http.Client
}

func newWorld(t *testing.T) *world {
	t.Helper()
	w := &world{bin: rendermacBinary(t), artifacts: t.TempDir()}
	w.db = pgprovider.MustDatabase(t, templateName, store.Migrate)
	ctx := context.Background()
	pool, err := store.OpenPool(ctx, w.db)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	w.pool = pool

	key := make([]byte, grant.MinKeyBytes)
	_, _ = rand.Read(key)
	w.keyFile = filepath.Join(t.TempDir(), "signing.key")
	require.NoError(t, os.WriteFile(w.keyFile, key, 0o600))

	w.buyerID = protocol.UUIDFrom(rand.Reader)
	svc := fencing.NewService(pool, nil, protocol.RandomIDs{Jobs: rand.Reader, Attempts: rand.Reader, Tokens: rand.Reader}, fencing.Config{})
	require.NoError(t, svc.CreateBuyer(ctx, w.buyerID, "buyer", openingCents))
	w.apiKey, err = api.CreateAPIKey(ctx, pool, w.buyerID)
	require.NoError(t, err)

	transport := http.DefaultTransport.(*http.Transport).Clone()
	w.client = &http.Client{Transport: transport, Timeout: 10 * time.Second}
	t.Cleanup(transport.CloseIdleConnections)
	return w
}

// proc is one `rendermac server` subprocess.
type proc struct {
	name, addr, base string
	cmd              *exec.Cmd
	logs             *syncbuf.Buffer
	exited           chan struct{}
	state            *os.ProcessState // set once exited is closed
}

var listeningLine = regexp.MustCompile(`msg="rendermac server listening" addr=(\S+)`)

// start runs `rendermac server` on listen (":0" picks a port) with faults
// as RENDERMAC_FAULTPOINTS ("" arms nothing) and any extra flags, waits
// until /readyz answers 200, and kills the process when the test ends,
// logging its output if the test failed.
func (w *world) start(t *testing.T, name, listen, faults string, extra ...string) *proc {
	t.Helper()
	p := &proc{name: name, logs: &syncbuf.Buffer{}, exited: make(chan struct{})}
	args := append([]string{"server", "--db", w.db, "--artifacts", w.artifacts, "--signing-key-file", w.keyFile,
		"--listen", listen, "--lease-ttl", leaseTTL.String(), "--heartbeat", heartbeat.String()}, extra...)
	p.cmd = exec.Command(w.bin, args...)
	p.cmd.Env = append(serverEnv(faults), w.env...)
	p.cmd.Stdout, p.cmd.Stderr = p.logs, p.logs
	require.NoError(t, p.cmd.Start())
	go func() {
		_ = p.cmd.Wait()
		p.state = p.cmd.ProcessState
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("--- log of server %s (pid %d, faults %q) ---\n%s", name, p.cmd.Process.Pid, faults, p.logs.String())
		}
	})
	deadline := time.Now().Add(waitFor)
	for p.addr == "" {
		if m := listeningLine.FindStringSubmatch(p.logs.String()); m != nil {
			p.addr, p.base = m[1], "http://"+m[1]
			break
		}
		p.requireRunning(t, deadline)
	}
	for !p.ready(w.client) {
		p.requireRunning(t, deadline)
	}
	return p
}

// serverEnv is this process's environment without any setting the server
// reads (OpenTelemetry's OTEL_* included), plus the fault points to arm.
func serverEnv(faults string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "RENDERMAC_") && !strings.HasPrefix(kv, "DATABASE_URL=") && !strings.HasPrefix(kv, "OTEL_") {
			env = append(env, kv)
		}
	}
	if faults != "" {
		env = append(env, faultpoint.EnvVar+"="+faults)
	}
	return env
}

func (p *proc) requireRunning(t *testing.T, deadline time.Time) {
	t.Helper()
	select {
	case <-p.exited:
		t.Fatalf("server %s exited while starting: %v", p.name, p.state)
	case <-time.After(20 * time.Millisecond):
	}
	if time.Now().After(deadline) {
		t.Fatalf("server %s not ready within %v", p.name, waitFor)
	}
}

func (p *proc) ready(c *http.Client) bool {
	resp, err := c.Get(p.base + "/readyz")
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func (p *proc) kill() {
	select {
	case <-p.exited:
	default:
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// requireKilledBySIGKILL waits for the process to exit and fails unless a
// SIGKILL ended it.
func (p *proc) requireKilledBySIGKILL(t *testing.T) {
	t.Helper()
	select {
	case <-p.exited:
	case <-time.After(waitFor):
		t.Fatalf("server %s still running %v after the kill point should have fired", p.name, waitFor)
	}
	ws, ok := p.state.Sys().(syscall.WaitStatus)
	require.True(t, ok, "wait status of %s: %T", p.name, p.state.Sys())
	require.True(t, ws.Signaled(), "server %s exited with %v, not by a signal", p.name, p.state)
	require.Equal(t, syscall.SIGKILL, ws.Signal(), "server %s", p.name)
}

// device is a paired device and its bearer token.
type device struct{ id, token string }

// pair mints a pairing code as an operator would and redeems it at p.
func (w *world) pair(t *testing.T, p *proc) device {
	t.Helper()
	code, _, err := api.CreatePairingCode(context.Background(), w.pool, time.Time{}, 10*time.Minute)
	require.NoError(t, err)
	var reply struct {
		DeviceID    string `json:"device_id"`
		DeviceToken string `json:"device_token"`
	}
	w.call(t, http.MethodPost, p.base+"/v1/provider/pair", "", map[string]any{"code": code, "name": "mac-" + p.name,
		"services": services}, http.StatusCreated, &reply)
	require.True(t, protocol.ValidID(reply.DeviceID))
	return device{id: reply.DeviceID, token: reply.DeviceToken}
}

// dial opens the device's WebSocket session at p and says hello.
func dial(t *testing.T, p *proc, d device, slots int) *deviceclient.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deviceclient.Timeout)
	defer cancel()
	c, _, err := deviceclient.Dial(ctx, deviceclient.WSURL(p.base, "/v1/provider/ws"), d.token)
	require.NoError(t, err)
	t.Cleanup(c.Drop)
	w := deviceclient.MustHello(t, c, services, slots, slots)
	require.Equal(t, d.id, w.DeviceID)
	return c
}

func (w *world) createJob(t *testing.T, p *proc) string {
	t.Helper()
	var job buyer.JobDetail
	w.call(t, http.MethodPost, p.base+"/v1/jobs", w.apiKey, map[string]any{"service": service}, http.StatusCreated, &job)
	// The 201 body is the job read after the create committed: a device
	// already waiting (possibly on another server) may have leased it by then.
	require.Contains(t, []protocol.JobStatus{protocol.JobQueued, protocol.JobActive}, job.Status)
	return job.ID
}

func (w *world) job(t *testing.T, p *proc, id string) buyer.JobDetail {
	t.Helper()
	var job buyer.JobDetail
	w.call(t, http.MethodGet, p.base+"/v1/jobs/"+id, w.apiKey, nil, http.StatusOK, &job)
	return job
}

// waitTerminal polls the job at p until it is terminal.
func (w *world) waitTerminal(t *testing.T, p *proc, id string) buyer.JobDetail {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for {
		job := w.job(t, p, id)
		if job.Status.Terminal() {
			return job
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s still %s after %v", id, job.Status, waitFor)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// call sends body as JSON with the bearer token (none when ""), requires
// status and decodes the reply into out (unless nil).
func (w *world) call(t *testing.T, method, url, bearer string, body any, status int, out any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		require.NoError(t, err)
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, url, rd)
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := w.client.Do(req)
	require.NoError(t, err, "%s %s", method, url)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, status, resp.StatusCode, "%s %s: %s", method, url, data)
	if out != nil {
		require.NoError(t, json.Unmarshal(data, out), "%s", data)
	}
}

// upload PUTs content to the offer's output grant URL.
func (w *world) upload(t *testing.T, o *protocol.LeaseOffer, content []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPut, o.Output.UploadURL, bytes.NewReader(content))
	require.NoError(t, err)
	resp, err := w.client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	require.Equal(t, http.StatusOK, resp.StatusCode, "PUT %s: %s", o.Output.Key, data)
}

// requireNoViolations fails t with every broken SPEC section 4 invariant.
func (w *world) requireNoViolations(t *testing.T) {
	t.Helper()
	v, err := store.CheckInvariants(context.Background(), w.pool)
	require.NoError(t, err)
	require.Empty(t, v)
}

// expectClosed requires that the session ends before any further frame.
func expectClosed(t *testing.T, c *deviceclient.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	msg, err := c.Next(ctx)
	require.Truef(t, errors.Is(err, deviceclient.ErrClosed), "expected the session to end, got %T %+v, %v", msg, msg, err)
}

// waitLog waits until p's log contains s.
func waitLog(t *testing.T, p *proc, s string) {
	t.Helper()
	require.Eventually(t, func() bool { return strings.Contains(p.logs.String(), s) }, waitFor, 20*time.Millisecond,
		"server %s never logged %q", p.name, s)
}
