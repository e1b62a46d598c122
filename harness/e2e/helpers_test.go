package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/agent"
	"github.com/rendermac/rendermac/agent/runner"
	"github.com/rendermac/rendermac/client"
	"github.com/rendermac/rendermac/internal/mp4"
	"github.com/rendermac/rendermac/internal/pgprovider"
	"github.com/rendermac/rendermac/internal/syncbuf"
	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/protocol/buyer"
	"github.com/rendermac/rendermac/server/api"
	"github.com/rendermac/rendermac/server/controlplane"
	"github.com/rendermac/rendermac/server/store"
)

// Tunables of every stack: short enough that an expired lease is swept
// within a few seconds, long enough that a 2-core machine shared with other
// test processes renews every lease in time (the agent renews every
// min(heartbeat, ttl/3) = 500ms, four chances per lease).
const (
	templateName  = "rendermac_e2e"
	leaseTTL      = 2 * time.Second
	heartbeat     = 500 * time.Millisecond
	sweepInterval = 200 * time.Millisecond
	pollInterval  = 200 * time.Millisecond
	// jobTimeout bounds every wait for a job to reach a state.
	jobTimeout = 30 * time.Second
	// stopTimeout bounds a graceful stop of the control plane (its own
	// drain bound is 30s) or an agent.
	stopTimeout       = 40 * time.Second
	buyerBalanceCents = 10_000
)

// logBuffer collects a component's logs; they are printed only when the
// test fails, so a passing run stays quiet.
type logBuffer struct {
	syncbuf.Buffer
}

// pollLog marks the API's log line for a GET /v1/jobs/{id}: the tests poll
// it every 20ms, so those lines would bury everything else.
var pollLog = []byte(`route="GET /v1/jobs/{id}"`)

func (l *logBuffer) Write(p []byte) (int, error) {
	if bytes.Contains(p, pollLog) && bytes.Contains(p, []byte(" status=200 ")) {
		return len(p), nil
	}
	return l.Buffer.Write(p)
}

func newLogBuffer(t *testing.T, name string) *logBuffer {
	l := &logBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("---- %s log ----\n%s", name, l.String())
		}
	})
	return l
}

func debugLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// stack is one test's control plane: a fresh database, an artifact dir, a
// signing key, the running controlplane.Run, and a buyer with an API key.
// It can be stopped and started again on the same address and database.
type stack struct {
	t     *testing.T
	cfg   controlplane.Config
	plane *controlplane.Plane
	stop  context.CancelFunc
	done  chan error
	// restarts counts completed starts after the first.
	restarts int

	client *http.Client
	// buyer is the test's buyer, through the public API.
	buyer *client.Client
	// apiKey is the buyer's key, for the tests that send it by hand.
	apiKey string
}

// newStack starts a control plane on 127.0.0.1:<free port>. When the test
// ends, agents are stopped first (registered later, so they run earlier),
// then the control plane, then SPEC section 4 is checked over the rows.
func newStack(t *testing.T) *stack {
	t.Helper()
	return newStackWith(t, nil)
}

// newStackWith is newStack with tune applied to the configuration first
// (e.g. an S3 artifact store).
func newStackWith(t *testing.T, tune func(*controlplane.Config)) *stack {
	t.Helper()
	db := pgprovider.MustDatabase(t, templateName, store.Migrate)
	key := make([]byte, 32)
	_, err := rand.Read(key)
	require.NoError(t, err)
	s := &stack{t: t, client: &http.Client{Transport: &http.Transport{}, Timeout: 15 * time.Second}}
	s.cfg = controlplane.Config{
		DB: db, Listen: "127.0.0.1:0", Artifacts: t.TempDir(), SigningKey: key,
		LeaseTTL: leaseTTL, Heartbeat: heartbeat, SweepInterval: sweepInterval, PollInterval: pollInterval,
		Log: debugLogger(newLogBuffer(t, "control plane")),
	}
	if tune != nil {
		tune(&s.cfg)
	}
	t.Cleanup(func() { requireInvariants(t, db) })
	t.Cleanup(s.client.CloseIdleConnections)
	s.start()
	t.Cleanup(s.shutdown)
	checkOpenAPI(t, s.client, s.baseURL())

	ctx := context.Background()
	buyerID := protocol.UUIDFrom(rand.Reader)
	require.NoError(t, s.plane.Service.CreateBuyer(ctx, buyerID, "e2e buyer", buyerBalanceCents))
	apiKey, err := api.CreateAPIKey(ctx, s.plane.Pool, buyerID)
	require.NoError(t, err)
	s.apiKey = apiKey
	s.buyer, err = client.New(s.baseURL(), apiKey, client.WithHTTPClient(s.client))
	require.NoError(t, err)
	return s
}

// start runs controlplane.Run in a goroutine and waits for its ready
// callback. Once the first start has bound a port, cfg.Listen pins it, so
// a restart serves the same address (and the same grant base URL).
func (s *stack) start() {
	t := s.t
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan *controlplane.Plane, 1)
	done := make(chan error, 1)
	cfg := s.cfg
	go func() {
		done <- controlplane.Run(ctx, cfg, func(_ context.Context, p *controlplane.Plane) error {
			ready <- p
			return nil
		})
	}()
	select {
	case p := <-ready:
		s.plane, s.stop, s.done = p, cancel, done
		s.cfg.Listen = p.Addr
	case err := <-done:
		cancel()
		t.Fatalf("control plane did not start: %v", err)
	case <-time.After(stopTimeout):
		cancel()
		t.Fatalf("control plane did not become ready within %v", stopTimeout)
	}
}

// shutdown stops the control plane gracefully (cancels Run's context) and
// waits for Run to return. It is a no-op when it is not running.
func (s *stack) shutdown() {
	if s.stop == nil {
		return
	}
	s.stop()
	select {
	case err := <-s.done:
		require.NoError(s.t, err, "controlplane.Run")
	case <-time.After(stopTimeout):
		s.t.Fatalf("control plane did not stop within %v", stopTimeout)
	}
	s.stop, s.done, s.plane = nil, nil, nil
}

// restart stops the control plane and starts it again on the same address
// over the same database and artifact directory.
func (s *stack) restart() {
	s.t.Helper()
	s.shutdown()
	s.start()
	s.restarts++
}

// baseURL is the control plane's public URL (fixed across restarts).
func (s *stack) baseURL() string { return "http://" + s.cfg.Listen }

// requireInvariants checks SPEC section 4 over every row of db, through a
// pool of its own so it works after the control plane has stopped.
func requireInvariants(t *testing.T, db string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := store.OpenPool(ctx, db)
	require.NoError(t, err)
	defer pool.Close()
	violations, err := store.CheckInvariants(ctx, pool)
	require.NoError(t, err)
	require.Empty(t, violations, "SPEC section 4 invariants")
}

// createJob submits a job through POST /v1/jobs; a non-nil input is sent
// as input_base64.
func (s *stack) createJob(service string, params map[string]string, input []byte) buyer.JobDetail {
	t := s.t
	t.Helper()
	created, err := s.buyer.Create(context.Background(), client.CreateRequest{Service: service, Params: params, Input: input})
	require.NoError(t, err, "create job")
	d := created.Job
	// The job is announced from the creating transaction, so an idle agent
	// may already hold it when the API reads it back for the reply.
	require.Contains(t, []protocol.JobStatus{protocol.JobQueued, protocol.JobActive}, d.Status)
	return d
}

// job reads GET /v1/jobs/{id}.
func (s *stack) job(id string) buyer.JobDetail {
	t := s.t
	t.Helper()
	d, err := s.buyer.Get(context.Background(), id)
	require.NoError(t, err, "get job")
	return d
}

// events reads GET /v1/jobs/{id}/events.
func (s *stack) events(id string) []buyer.Event {
	t := s.t
	t.Helper()
	events, err := s.buyer.AllEvents(context.Background(), id)
	require.NoError(t, err, "events")
	return events
}

// waitJob polls GET /v1/jobs/{id} until cond holds, failing with the last
// state seen after jobTimeout. Polling the public API is the only
// synchronization: no fixed sleeps.
func (s *stack) waitJob(id, what string, cond func(buyer.JobDetail) bool) buyer.JobDetail {
	s.t.Helper()
	return s.waitJobWithin(jobTimeout, id, what, cond)
}

// waitJobWithin is waitJob with a bound of its own, for a job whose runner
// takes longer than jobTimeout (a real render).
func (s *stack) waitJobWithin(limit time.Duration, id, what string, cond func(buyer.JobDetail) bool) buyer.JobDetail {
	t := s.t
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		d := s.job(id)
		if cond(d) {
			return d
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s: not %s within %v; last seen: %s", id, what, limit, describe(d))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitTerminal waits until the job is succeeded, cancelled or failed.
func (s *stack) waitTerminal(id string) buyer.JobDetail {
	s.t.Helper()
	return s.waitJob(id, "terminal", func(d buyer.JobDetail) bool { return d.Status.Terminal() })
}

// waitAttemptStatus waits until the job's attempt number n has status st.
func (s *stack) waitAttemptStatus(id string, n int, st protocol.AttemptStatus) buyer.JobDetail {
	s.t.Helper()
	return s.waitJob(id, fmt.Sprintf("with attempt %d %s", n, st), func(d buyer.JobDetail) bool {
		return len(d.Attempts) >= n && d.Attempts[n-1].Status == st
	})
}

func describe(d buyer.JobDetail) string {
	out := fmt.Sprintf("status=%s failure=%q attempts=[", d.Status, d.FailureCode)
	for i, a := range d.Attempts {
		if i > 0 {
			out += " "
		}
		out += fmt.Sprintf("#%d %s %q", a.Number, a.Status, a.FailureCode)
	}
	return out + "]"
}

// requireSucceededOutput checks a succeeded job's output end to end: it is
// recorded with a sha256, its download_url (a signed grant, no API key)
// yields exactly bytes with that sha256 and size, and those bytes pass the
// same MP4 walk the verifier runs. It returns the bytes.
func (s *stack) requireSucceededOutput(d buyer.JobDetail) []byte {
	t := s.t
	t.Helper()
	require.Equal(t, protocol.JobSucceeded, d.Status, describe(d))
	require.NotNil(t, d.Output, "a succeeded job shows its output")
	require.Regexp(t, `^[0-9a-f]{64}$`, d.Output.SHA256)
	var won *buyer.Attempt
	for i := range d.Attempts {
		if d.Attempts[i].Status == protocol.AttemptSucceeded {
			require.Nil(t, won, "two succeeded attempts: %s", describe(d))
			won = &d.Attempts[i]
		}
	}
	require.NotNil(t, won, describe(d))
	require.Equal(t, protocol.OutputKey(d.ID, won.ID), d.Output.Key, "output sits at the winning attempt's key")

	resp, err := s.client.Get(d.Output.DownloadURL)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "download: %s", body)
	sum := sha256.Sum256(body)
	require.Equal(t, d.Output.SHA256, hex.EncodeToString(sum[:]), "downloaded bytes hash to the recorded sha256")
	require.EqualValues(t, d.Output.Bytes, len(body))
	info, err := mp4.Check(bytes.NewReader(body), int64(len(body)))
	require.NoError(t, err, "downloaded output passes mp4.Check")
	require.Positive(t, info.Duration)
	return body
}

// requireOneSettledHold checks the money side of "exactly once": the job
// has exactly one hold, in the given state, and exactly one terminal
// webhook row.
func (s *stack) requireOneSettledHold(jobID, status string) {
	t := s.t
	t.Helper()
	ctx := context.Background()
	var holds []string
	rows, err := s.plane.Pool.Query(ctx, `SELECT status FROM holds WHERE job_id = $1`, jobID)
	require.NoError(t, err)
	for rows.Next() {
		var st string
		require.NoError(t, rows.Scan(&st))
		holds = append(holds, st)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{status}, holds, "exactly one hold, %s", status)
	var hooks int
	require.NoError(t, s.plane.Pool.QueryRow(ctx,
		`SELECT count(*) FROM webhook_outbox WHERE job_id = $1 AND event IN ('succeeded','cancelled','failed')`,
		jobID).Scan(&hooks))
	require.Equal(t, 1, hooks, "exactly one terminal webhook")
}

// attemptRow is what the database (not the API, which never shows token
// material) knows of an attempt.
type attemptRow struct {
	Number    int
	Status    string
	DeviceID  string
	Epoch     int
	TokenHash string
	Failure   string
}

func (s *stack) attemptRows(jobID string) []attemptRow {
	t := s.t
	t.Helper()
	rows, err := s.plane.Pool.Query(context.Background(), `
SELECT attempt_number, status, device_id::text, lease_epoch, commit_token_hash, coalesce(failure_code, '')
FROM job_attempts WHERE job_id = $1 ORDER BY attempt_number`, jobID)
	require.NoError(t, err)
	var out []attemptRow
	for rows.Next() {
		var r attemptRow
		require.NoError(t, rows.Scan(&r.Number, &r.Status, &r.DeviceID, &r.Epoch, &r.TokenHash, &r.Failure))
		out = append(out, r)
	}
	require.NoError(t, rows.Err())
	return out
}

// firstTrySucceeded is the journal of a job whose first attempt succeeds:
// every phase the agent went through, in order, attempt rows before the job
// row of the same step.
var firstTrySucceeded = []string{
	"job:>queued", "attempt:>leased", "job:queued>active",
	"attempt:leased>downloading", "attempt:downloading>running", "attempt:running>uploading",
	"attempt:uploading>committing", "job:active>verifying",
	"attempt:committing>succeeded", "job:verifying>succeeded",
}

// transitions renders a journal as "kind:from>to" strings.
func transitions(events []buyer.Event) []string {
	out := make([]string, 0, len(events))
	for _, e := range events {
		out = append(out, e.Kind+":"+e.FromStatus+">"+e.ToStatus)
	}
	return out
}

func jobTransitions(events []buyer.Event) []string {
	var out []string
	for _, e := range events {
		if e.Kind == "job" {
			out = append(out, e.FromStatus+">"+e.ToStatus)
		}
	}
	return out
}

// pair redeems a fresh pairing code through the real POST
// /v1/provider/pair (agent.Pair) and writes the credentials to a 0600 token
// file, as `rendermac agent --pair` does. It returns the file's path.
func (s *stack) pair(services ...string) (agent.Credentials, string) {
	t := s.t
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	code, _, err := api.CreatePairingCode(ctx, s.plane.Pool, time.Time{}, 10*time.Minute)
	require.NoError(t, err)
	creds, err := agent.Pair(ctx, agent.Transport{}, s.baseURL(), code, "e2e-mac", services)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "device.json")
	require.NoError(t, agent.SaveCredentials(path, creds))
	return creds, path
}

// agentOptions override what runAgent starts with.
type agentOptions struct {
	// serverURL is where the agent connects (a proxy); "" is the credentials' server.
	serverURL string
	services  []string
	runners   map[string]runner.Runner
	slots     int // 0 is 1
}

// agentRun is an agent running in this process.
type agentRun struct {
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
	t      *testing.T
}

// runAgent starts the real agent (agent.New + Run) with the device's
// credentials. It is stopped gracefully when the test ends.
func runAgent(t *testing.T, name string, creds agent.Credentials, opts agentOptions) *agentRun {
	t.Helper()
	services := opts.services
	if services == nil {
		services = []string{runner.ServiceSynthetic}
	}
	serverURL := opts.serverURL
	if serverURL == "" {
		serverURL = creds.Server
	}
	client := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(client.CloseIdleConnections)
	checkOpenAPI(t, client, serverURL)
	a, err := agent.New(agent.Config{
		ServerURL: serverURL, DeviceToken: creds.DeviceToken, Services: services, Slots: max(opts.slots, 1),
		WorkDir: t.TempDir(), Rand: mrand.New(mrand.NewPCG(mrand.Uint64(), mrand.Uint64())),
		Logger: debugLogger(newLogBuffer(t, name)), HTTPClient: client, Runners: opts.runners,
		BackoffBase: 50 * time.Millisecond, BackoffMax: 500 * time.Millisecond, ShutdownTimeout: 2 * time.Second,
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	r := &agentRun{cancel: cancel, done: make(chan error, 1), t: t}
	go func() { r.done <- a.Run(ctx) }()
	t.Cleanup(r.stop)
	return r
}

// stop cancels the agent's context (a graceful shutdown) and waits for Run.
func (r *agentRun) stop() {
	r.once.Do(func() {
		r.cancel()
		select {
		case err := <-r.done:
			require.NoError(r.t, err, "agent.Run")
		case <-time.After(stopTimeout):
			r.t.Fatalf("agent did not stop within %v", stopTimeout)
		}
	})
}

// syntheticOutput is the exact file the synthetic runner writes for params.
func syntheticOutput(t *testing.T, params map[string]string) []byte {
	t.Helper()
	p, err := runner.ParseSyntheticParams(params)
	require.NoError(t, err)
	return p.File()
}

// requireNoStatus fails if any journal row reaches status st.
func requireNoStatus(t *testing.T, events []buyer.Event, st string) {
	t.Helper()
	require.False(t, slices.ContainsFunc(events, func(e buyer.Event) bool { return e.ToStatus == st }),
		"journal reaches %s: %v", st, transitions(events))
}

// ciRequired says whether a missing prerequisite (ffmpeg) must fail rather
// than skip: under CI=true a skipped test would read as a pass.
func ciRequired() bool { return os.Getenv("CI") == "true" }
