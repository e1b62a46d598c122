package scenarios

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rendermac/rendermac/agent"
	"github.com/rendermac/rendermac/agent/runner"
	"github.com/rendermac/rendermac/internal/clock"
)

// The agent's own rules (docs/SPEC.md section 5, "The agent ... keeps
// itself alive") need more of the world around a shipped agent than a
// relay that cuts: a path that black-holes, a store that answers 503, a
// disk that fills, a signal, a clock a session can outlast. Each is given
// to the agent the way a Mac gives it (its configured clock, free-space
// probe, HTTP transport and signal channel) or the way a network does (the
// relay), never by a hook inside the agent; and each rule is judged on
// what the agent did (its frames, its PUTs, its dials, its files).

// scAgentVerb is one `agent VERB A ...` step of this file.
type scAgentVerb func(r *scRun, a *scRealAgent, st scStep) error

// scAgentVerbs are the verbs of this file. Filled in init: the handlers
// reach cmdAgent's table through the parser.
var scAgentVerbs map[string]scAgentVerb

func init() {
	scAgentVerbs = map[string]scAgentVerb{
		"signal": agentSignal, "exited": agentExited, "stall": agentStall, "flush": agentFlush, "put": agentPut,
		"disk": agentDisk, "clock": agentClockJump, "count": agentCount, "backoff": agentBackoff, "waits": agentWaits,
		"workdir": agentWorkdir, "recorded": agentRecorded,
	}
}

// scSessionHealthy is the SPEC's "a session that lasted 10 s past its
// welcome", after which the backoff starts over.
const scSessionHealthy = 10 * time.Second

// scUploadWaits are the SPEC's waits between an upload's tries: doubling
// from 250 ms, six tries.
var scUploadWaits = []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second}

// scBoundSlack is what a `within=` bound named by a rule allows above the
// rule's own bound: a handshake through the relay and the scheduling of a
// loaded two-core machine. Every mutant of those rules misses by seconds.
const scBoundSlack = 700 * time.Millisecond

// scAgentClock is a shipped agent's clock: the wall clock, sped up speed
// times (its heartbeats, backoffs and upload waits pass that much faster)
// and moved on by `agent clock` (a session outlasts its healthy bound in
// an instant). Real time is what it measures, so its timers fire late,
// never early.
type scAgentClock struct {
	base   time.Time
	speed  int64
	offset atomic.Int64
}

func newAgentClock(speed int64) *scAgentClock { return &scAgentClock{base: time.Now(), speed: speed} }

func (c *scAgentClock) Now() time.Time {
	return c.base.Add(time.Since(c.base)*time.Duration(c.speed) + time.Duration(c.offset.Load()))
}

func (c *scAgentClock) Pinned() (time.Time, bool) { return time.Time{}, false }

func (c *scAgentClock) After(d time.Duration) <-chan time.Time {
	return time.After(d / time.Duration(c.speed))
}

func (c *scAgentClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	return time.AfterFunc(d/time.Duration(c.speed), f)
}

// scDisk is a shipped agent's free-space probe (agent.Config.FreeBytes):
// plenty, or below any minimum while low.
type scDisk struct{ low atomic.Bool }

func (d *scDisk) free(string) (int64, bool) {
	if d.low.Load() {
		return 1 << 20, true // 1 MiB: below the default minimum of 256 MiB
	}
	return 1 << 40, true
}

// scAgentLog passes a shipped agent's log on, and records the waits it
// states as pseudo-frames: a reconnect's backoff (`retry_in`, with how
// long the session `lasted`) and an upload's retry (`retry_in` with its
// `try`), so that the script can hold them against the SPEC's bounds and
// against the times the relay saw the agent act.
type scAgentLog struct {
	inner slog.Handler
	relay *scRelay
}

func (h *scAgentLog) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelInfo || h.inner.Enabled(ctx, l)
}

func (h *scAgentLog) Handle(ctx context.Context, rec slog.Record) error {
	var retryIn, lasted time.Duration
	waits, upload := false, false
	rec.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "retry_in":
			retryIn, waits = a.Value.Duration(), true
		case "lasted":
			lasted = a.Value.Duration()
		case "try":
			upload = true
		}
		return true
	})
	if waits {
		typ := "backoff"
		if upload {
			typ = "upload_retry"
		}
		h.relay.add(scWireFrame{sent: true, session: h.relay.sessionNow(), typ: typ, detail: []string{"-"}, d: retryIn, lasted: lasted})
	}
	if h.inner.Enabled(ctx, rec.Level) {
		return h.inner.Handle(ctx, rec)
	}
	return nil
}

func (h *scAgentLog) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &scAgentLog{inner: h.inner.WithAttrs(attrs), relay: h.relay}
}

func (h *scAgentLog) WithGroup(name string) slog.Handler {
	return &scAgentLog{inner: h.inner.WithGroup(name), relay: h.relay}
}

// blackHole silences every connection of the agent's for good (no RST,
// no FIN reaches it: a Wi-Fi change, a wake from sleep) and drops their
// gateway ends, as the gateway's own pings would; new connections pass
// again at once unless the relay is offline. It returns how many it
// silenced.
func (rl *scRelay) blackHole() int {
	n := 0
	for _, f := range rl.fronts {
		n += f.proxy.BlackHole()
		f.proxy.Heal()
	}
	rl.mu.Lock()
	live := slices.Clone(rl.live)
	rl.mu.Unlock()
	for _, s := range live {
		s.gatewayConn.CloseNow()
	}
	return n
}

// awaitFlush blocks an agent frame while the relay is stalled.
func (rl *scRelay) awaitFlush() {
	rl.mu.Lock()
	ch := rl.stalled
	rl.mu.Unlock()
	if ch != nil {
		<-ch
	}
}

// flush lets the held frames go, in order.
func (rl *scRelay) flush() {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	if rl.stalled != nil {
		close(rl.stalled)
		rl.stalled = nil
	}
}

// uploadAttempt names the attempt whose upload URL req is.
func (rl *scRelay) uploadAttempt(req *http.Request) string {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	if name, ok := rl.uploads[req.URL.Path]; ok {
		return name
	}
	return "-"
}

// scriptedPut answers the agent's PUT with the next scripted answer, if
// any: a status from the store, or conn, a connection that failed.
func (rl *scRelay) scriptedPut(req *http.Request) (*http.Response, error, bool) {
	rl.mu.Lock()
	if len(rl.puts) == 0 {
		rl.mu.Unlock()
		return nil, nil, false
	}
	answer := rl.puts[0]
	rl.puts = rl.puts[1:]
	rl.mu.Unlock()
	if req.Body != nil {
		_ = req.Body.Close()
	}
	rl.add(scWireFrame{sent: true, session: rl.sessionNow(), typ: "put", detail: []string{"status=" + answer, rl.uploadAttempt(req)}})
	if answer == "conn" {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, true
	}
	status, _ := strconv.Atoi(answer) // checked by agentPut
	body := fmt.Sprintf(`{"code":"scenario_%d","message":"answered by the scenario"}`, status)
	return &http.Response{StatusCode: status, Status: fmt.Sprintf("%d %s", status, http.StatusText(status)), Proto: "HTTP/1.1",
		ProtoMajor: 1, ProtoMinor: 1, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body)), Request: req}, nil, true
}

// recordPut records the store's own answer to a PUT.
func (rl *scRelay) recordPut(req *http.Request, resp *http.Response, err error) {
	status := "conn"
	if err == nil {
		status = strconv.Itoa(resp.StatusCode)
	}
	rl.add(scWireFrame{sent: true, session: rl.sessionNow(), typ: "put", detail: []string{"status=" + status, rl.uploadAttempt(req)}})
}

// prepare sets the agent's world up before it starts: disk=low, and
// stale=N attempt directories a previous run left (with files in them),
// beside entries that are not attempt directories and must stay.
func (a *scRealAgent) prepare(st scStep) error {
	switch d := st.opt("disk", "ok"); d {
	case "ok":
	case "low":
		a.disk.low.Store(true)
	default:
		return fmt.Errorf("disk=%s: want ok or low", d)
	}
	stale, err := optInt(st, "stale", 0)
	if err != nil {
		return err
	}
	if stale == 0 {
		return nil
	}
	for i := range stale {
		dir := filepath.Join(a.workDir, fmt.Sprintf("00000000-0000-4000-8000-%012x", 0xa001+i))
		if err := os.MkdirAll(filepath.Join(dir, "partial"), 0o700); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, "partial", "output.mp4"), make([]byte, 4096), 0o600); err != nil {
			return err
		}
	}
	// Not attempt directories: a file named like an attempt, and others.
	for _, f := range []string{scStaleKeptFile, "notes.txt"} {
		if err := os.WriteFile(filepath.Join(a.workDir, f), []byte("not an attempt\n"), 0o600); err != nil {
			return err
		}
	}
	return os.Mkdir(filepath.Join(a.workDir, "cache"), 0o700)
}

// scStaleKeptFile is named like an attempt but is a file: it stays.
const scStaleKeptFile = "00000000-0000-4000-8000-00000000afff"

// agentSignal is `agent signal A TERM|INT|QUIT`: the signal, as
// signal.Notify delivers it to RunSignalled.
// Example: agent signal a1 TERM
func agentSignal(r *scRun, a *scRealAgent, st scStep) error {
	sig := map[string]os.Signal{"TERM": syscall.SIGTERM, "INT": syscall.SIGINT, "QUIT": syscall.SIGQUIT}[arg(st, 2)]
	if sig == nil {
		return errors.New("want: agent signal AGENT TERM|INT|QUIT")
	}
	a.sigs <- sig
	r.tl.add(laneAgent, fmt.Sprintf("%s: SIG%s", a.name, arg(st, 2)))
	return nil
}

// agentExited is `agent exited A`: its Run returned nil (the process would
// exit 0) within the frame timeout.
// Example: agent exited a1
func agentExited(r *scRun, a *scRealAgent, _ scStep) error {
	select {
	case <-a.exited:
	case <-time.After(r.timeout):
		return fmt.Errorf("agent %s still running %v later; wire: %s", a.name, r.timeout, a.relay.summary())
	}
	a.stop()
	if a.runErr != nil {
		return fmt.Errorf("agent %s exited with an error (the process would exit non-zero): %w", a.name, a.runErr)
	}
	r.tl.add(laneAgent, a.name+": Run returned nil: the process exits 0")
	return nil
}

// agentStall is `agent stall A`: the agent's frames are recorded but held
// back from the gateway until `agent flush A`, so that an offer reaches an
// agent whose latest report the gateway has not read yet.
// Example: agent stall a1
func agentStall(r *scRun, a *scRealAgent, _ scStep) error {
	a.relay.mu.Lock()
	if a.relay.stalled == nil {
		a.relay.stalled = make(chan struct{})
	}
	a.relay.mu.Unlock()
	r.tl.add(laneAgent, a.name+": its frames held back from the gateway")
	return nil
}

// agentFlush is `agent flush A`: the held frames go on, in order.
// Example: agent flush a1
func agentFlush(r *scRun, a *scRealAgent, _ scStep) error {
	a.relay.flush()
	r.tl.add(laneAgent, a.name+": its held frames delivered")
	return nil
}

// agentPut is `agent put A ANSWER...`: the agent's next PUTs are answered
// so, in order (a status, or conn: no connection), without reaching the
// store; later ones reach it.
// Example: agent put a1 conn 502 503 504
func agentPut(r *scRun, a *scRealAgent, st scStep) error {
	answers := st.args[2:]
	if len(answers) == 0 {
		return errors.New("want: agent put AGENT conn|STATUS ...")
	}
	for _, w := range answers {
		if n, err := strconv.Atoi(w); w != "conn" && (err != nil || n < 200 || n > 599) {
			return fmt.Errorf("agent put: %q is neither conn nor an HTTP status", w)
		}
	}
	a.relay.mu.Lock()
	a.relay.puts = append(a.relay.puts, answers...)
	a.relay.mu.Unlock()
	r.tl.add(laneAgent, fmt.Sprintf("%s: its next PUTs answered %s", a.name, strings.Join(answers, ", ")))
	return nil
}

// agentDisk is `agent disk A low|ok`: the work dir's file system has less
// than the agent's minimum free, or plenty.
// Example: agent disk a1 low
func agentDisk(r *scRun, a *scRealAgent, st scStep) error {
	switch arg(st, 2) {
	case "low", "ok":
		a.disk.low.Store(arg(st, 2) == "low")
	default:
		return errors.New("want: agent disk AGENT low|ok")
	}
	r.tl.add(laneAgent, a.name+": work dir free space "+arg(st, 2))
	return nil
}

// agentClockJump is `agent clock A +D`: the agent's clock moves on by D.
// Example: agent clock a1 +11s
func agentClockJump(r *scRun, a *scRealAgent, st scStep) error {
	d, err := time.ParseDuration(strings.TrimPrefix(arg(st, 2), "+"))
	if err != nil || d <= 0 {
		return errors.New("want: agent clock AGENT +DURATION")
	}
	a.clock.offset.Add(int64(d))
	r.tl.add(laneAgent, fmt.Sprintf("%s: its clock moved on by %v", a.name, d))
	return nil
}

// agentCount is `agent count A sent|got TYPE [WORDS] -> N`: exactly N such
// frames so far.
// Example: agent count a1 sent put j1#1 -> 6
func agentCount(r *scRun, a *scRealAgent, st scStep) error {
	dir := arg(st, 2)
	want, err := strconv.Atoi(strings.Join(st.arrow, ""))
	if (dir != "sent" && dir != "got") || err != nil {
		return errors.New("want: agent count AGENT sent|got TYPE [WORDS] -> N")
	}
	spec := wireSpec(st)
	if i := slices.Index(spec, "->"); i >= 0 {
		spec = spec[:i]
	}
	got := 0
	for _, f := range a.relay.snapshot() {
		if f.sent == (dir == "sent") && matchSpec([][]string{spec}, f.typ, f.detail) == 0 {
			got++
		}
	}
	if got != want {
		return fmt.Errorf("agent %s %s %s %d times, want %d; wire: %s", a.name, dir, strings.Join(spec, " "), got, want, a.relay.summary())
	}
	r.tl.add(laneAgent, fmt.Sprintf("%s %s %s %d times", a.name, dir, strings.Join(spec, " "), got))
	return nil
}

// agentBackoff is `agent backoff A`: every reconnect delay the agent
// stated so far was full jitter (SPEC section 5, agent.backoff): the n-th
// consecutive failure's at most min(max, base*2^n), n starting over after
// a session that lasted past scSessionHealthy; the agent dialled no sooner
// than the delay it stated; and the delays spread below their ceilings
// (some under half of theirs), as a uniform draw does.
// Example: agent backoff a1
func agentBackoff(r *scRun, a *scRealAgent, _ scStep) error {
	frames := a.relay.snapshot()
	n, drawn, low := 0, 0, 0
	var errs []string
	for i, f := range frames {
		if f.typ != "backoff" {
			continue
		}
		if f.lasted > scSessionHealthy {
			n = 0
		}
		ceil := a.cfg.BackoffMax
		if n < 30 && a.cfg.BackoffBase<<n < ceil {
			ceil = a.cfg.BackoffBase << n
		}
		n++
		drawn++
		if f.d > ceil {
			errs = append(errs, fmt.Sprintf("delay %d (failure %d in a row, the session before it lasted %v): %v, above the ceiling %v",
				drawn, n, f.lasted, f.d, ceil))
		}
		if f.d < ceil/2 {
			low++
		}
		if next := nextDial(frames[i+1:]); next != nil {
			if gap := next.at.Sub(f.at); gap < f.d/time.Duration(a.clock.speed) {
				errs = append(errs, fmt.Sprintf("delay %d: dialled %v after stating a delay of %v", drawn, gap, f.d))
			}
		}
	}
	switch {
	case drawn < 4:
		errs = append(errs, fmt.Sprintf("only %d reconnect delays stated; the script needs at least 4", drawn))
	case low == 0:
		errs = append(errs, fmt.Sprintf("none of %d delays was under half its ceiling: no jitter", drawn))
	}
	if len(errs) > 0 {
		return fmt.Errorf("agent %s backoff:\n  %s", a.name, strings.Join(errs, "\n  "))
	}
	r.tl.add(laneAgent, fmt.Sprintf("%s: %d reconnect delays, each within its full-jitter ceiling and waited (%d under half of it)",
		a.name, drawn, low))
	return nil
}

// nextDial is the first dial (relayed or refused) among frames.
func nextDial(frames []scWireFrame) *scWireFrame {
	for i := range frames {
		if frames[i].typ == "dial" || frames[i].typ == "dial_refused" {
			return &frames[i]
		}
	}
	return nil
}

// agentWaits is `agent waits A upload`: the agent's upload retries waited
// the SPEC's doubling delays, each series of an attempt's failed PUTs
// starting again at 250 ms, and no PUT came sooner than its wait.
// Example: agent waits a1 upload
func agentWaits(r *scRun, a *scRealAgent, st scStep) error {
	if arg(st, 2) != "upload" {
		return errors.New("want: agent waits AGENT upload")
	}
	frames := a.relay.snapshot()
	var errs []string
	retries, k := 0, 0
	lastAttempt := ""
	for i, f := range frames {
		if f.typ == "put" {
			if at := f.detail[len(f.detail)-1]; at != lastAttempt {
				lastAttempt, k = at, 0
			}
			continue
		}
		if f.typ != "upload_retry" {
			continue
		}
		retries++
		if k >= len(scUploadWaits) {
			errs = append(errs, fmt.Sprintf("retry %d of %s: more than %d retries", k+1, lastAttempt, len(scUploadWaits)))
		} else if f.d != scUploadWaits[k] {
			errs = append(errs, fmt.Sprintf("retry %d of %s: waited %v, want %v", k+1, lastAttempt, f.d, scUploadWaits[k]))
		}
		k++
		for _, g := range frames[i+1:] {
			if g.typ == "put" {
				if gap := g.at.Sub(f.at); gap < f.d/time.Duration(a.clock.speed) {
					errs = append(errs, fmt.Sprintf("retry %d of %s: PUT again %v after stating a wait of %v", k, lastAttempt, gap, f.d))
				}
				break
			}
		}
	}
	if retries == 0 {
		errs = append(errs, "no upload retry at all")
	}
	if len(errs) > 0 {
		return fmt.Errorf("agent %s upload retries:\n  %s", a.name, strings.Join(errs, "\n  "))
	}
	r.tl.add(laneAgent, fmt.Sprintf("%s: %d upload retries, each waiting the SPEC's doubling delay", a.name, retries))
	return nil
}

// agentWorkdir is `agent workdir A -> NAME...`: what the agent's work dir
// holds, sorted (attempt directories show as their ids).
// Example: agent workdir a1 -> cache notes.txt
func agentWorkdir(r *scRun, a *scRealAgent, st scStep) error {
	entries, err := os.ReadDir(a.workDir)
	if err != nil {
		return err
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	slices.Sort(got)
	if want := strings.Join(st.arrow, " "); strings.Join(got, " ") != want {
		return fmt.Errorf("agent %s work dir holds [%s], want [%s]", a.name, strings.Join(got, " "), want)
	}
	r.tl.add(laneAgent, fmt.Sprintf("%s: work dir holds [%s]", a.name, strings.Join(got, " ")))
	return nil
}

// The record runner: a catalogue command service (runner kind command)
// whose program, run by agent/runner's Command, writes down the argv and
// environment it got and the params file it was given, then renders a
// valid MP4 to its output. The agent's own process environment holds a
// secret of ours (scRecordSecret), which must not reach it.
const (
	scRecordEnvKey = "RENDERMAC_SCENARIO_RECORD"
	scRecordSecret = "RENDERMAC_SCENARIO_AGENT_SECRET"
	// scRecordLiteral is an argv word a shell would expand and split.
	scRecordLiteral = "$HOME and; spaces `x`"
	scRecordScript  = `printf '%s\n' "$@" > "$` + scRecordEnvKey + `/argv"; env > "$` + scRecordEnvKey + `/env"; ` +
		`cp "$1" "$` + scRecordEnvKey + `/params"; cp "$` + scRecordEnvKey + `/render.mp4" "$2"`
)

var setRecordSecret sync.Once

func (a *scRealAgent) recordRunner() (runner.Runner, string, error) {
	setRecordSecret.Do(func() { _ = os.Setenv(scRecordSecret, "the agent's own, never the command's") })
	dir, err := os.MkdirTemp("", "rendermac-scenario-record-")
	if err != nil {
		return nil, "", err
	}
	a.record = dir
	p, err := runner.ParseSyntheticParams(map[string]string{"seed": "record"})
	if err != nil {
		return nil, "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "render.mp4"), p.File(), 0o600); err != nil {
		return nil, "", err
	}
	c, err := runner.NewCommand(runner.CommandConfig{
		Argv: []string{"sh", "-c", scRecordScript, "sh", runner.PlaceholderParams, runner.PlaceholderOutput,
			runner.PlaceholderInput, runner.PlaceholderDir, scRecordLiteral},
		Env: []string{scRecordEnvKey + "=" + dir},
	})
	if err != nil {
		return nil, "", err
	}
	return c, "command (records its argv and environment, then renders)", nil
}

// agentRecorded is `agent recorded A`: what the record runner's program
// last got (SPEC section 5, runner.command-env): its argv, word for word
// without a shell, the params file, the output path, the input path and
// its scratch dir, then the literal word; the params file the job's params
// as a JSON object; an environment of PATH, HOME, USER, LANG, LC_ALL,
// TMPDIR (the scratch dir) and the configured variable only.
// Example: agent recorded a1
func agentRecorded(r *scRun, a *scRealAgent, _ scStep) error {
	if a.record == "" {
		return errors.New("agent recorded: start the agent with runner=record")
	}
	argv, err := os.ReadFile(filepath.Join(a.record, "argv"))
	if err != nil {
		return fmt.Errorf("agent %s: the command never ran: %w", a.name, err)
	}
	env, err := os.ReadFile(filepath.Join(a.record, "env"))
	if err != nil {
		return err
	}
	params, err := os.ReadFile(filepath.Join(a.record, "params"))
	if err != nil {
		return err
	}
	var errs []string
	args := strings.Split(strings.TrimSuffix(string(argv), "\n"), "\n")
	if len(args) != 5 {
		errs = append(errs, fmt.Sprintf("argv has %d words after the program, want 5: %q", len(args), args))
	} else {
		if filepath.Dir(args[0]) != args[3] || !strings.HasPrefix(args[3], a.workDir+"/") {
			errs = append(errs, fmt.Sprintf("{params} %q is not a file in the scratch dir {dir} %q under the work dir", args[0], args[3]))
		}
		if !strings.HasPrefix(args[1], a.workDir+"/") || !strings.HasPrefix(args[2], a.workDir+"/") {
			errs = append(errs, fmt.Sprintf("{output} %q and {input} %q are not under the work dir", args[1], args[2]))
		}
		if args[4] != scRecordLiteral {
			errs = append(errs, fmt.Sprintf("the literal word arrived as %q, not %q: a shell read the argv", args[4], scRecordLiteral))
		}
	}
	if string(params) != `{"seed":"j1"}` {
		errs = append(errs, fmt.Sprintf("params file holds %s, want the job's params {\"seed\":\"j1\"}", params))
	}
	allowed := map[string]bool{"PATH": true, "HOME": true, "USER": true, "LANG": true, "LC_ALL": true, "TMPDIR": true,
		scRecordEnvKey: true, "PWD": true, "SHLVL": true, "_": true} // the last three sh sets itself
	var keys []string
	for _, line := range strings.Split(string(env), "\n") {
		k, v, ok := strings.Cut(line, "=")
		if !ok || k == "" || strings.ContainsAny(k, " \t") {
			continue // a value's own line break
		}
		keys = append(keys, k)
		if !allowed[k] {
			errs = append(errs, fmt.Sprintf("environment holds %s", k))
		}
		if k == "TMPDIR" && len(args) == 5 && v != args[3] {
			errs = append(errs, fmt.Sprintf("TMPDIR is %q, not the scratch dir %q", v, args[3]))
		}
		if strings.Contains(v, "j1") || strings.Contains(v, a.token) {
			errs = append(errs, fmt.Sprintf("environment variable %s carries the job's params or the device token", k))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("agent %s command runner:\n  %s", a.name, strings.Join(errs, "\n  "))
	}
	slices.Sort(keys)
	r.tl.add(laneAgent, fmt.Sprintf("%s: the command got argv [{params} {output} {input} {dir} %q] verbatim, the job's params in its file, environment %s",
		a.name, scRecordLiteral, strings.Join(keys, " ")))
	return nil
}

// awaitBound is an await's `within=`: a duration, or dead-connection
// (SPEC section 5, agent.dead-connection: min(ping_interval, ttl/3) +
// min(ping_timeout, ttl/3) with the agent's ping settings and the run's
// lease TTL, computed here from the SPEC's formula, then its next backoff
// ceiling) plus scBoundSlack; 0 when not given.
func (r *scRun) awaitBound(a *scRealAgent, st scStep) (time.Duration, error) {
	w := st.opt("within", "")
	switch w {
	case "":
		return 0, nil
	case "dead-connection":
		third := r.leaseTTL() / 3
		interval := min(orDefaultDuration(a.cfg.PingInterval, agent.DefaultPingInterval), third)
		timeout := min(orDefaultDuration(a.cfg.PingTimeout, agent.DefaultPingTimeout), third)
		return interval + timeout + a.cfg.BackoffMax + scBoundSlack, nil
	}
	d, err := time.ParseDuration(w)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("within=%s: want a duration or dead-connection", w)
	}
	return d, nil
}

func orDefaultDuration(v, def time.Duration) time.Duration {
	if v <= 0 {
		return def
	}
	return v
}
