package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rendermac/rendermac/harness/deviceclient"
	"github.com/rendermac/rendermac/harness/loadgen"
)

const (
	// idleWindow is how long the idle sessions are watched for wake-ups.
	idleWindow = 3 * time.Second
	// idleSettle lets the server finish each hello's lease attempt (no
	// job) before memory is read.
	idleSettle = time.Second
	// fdMargin is the descriptors a process needs beside its sessions
	// (database connections, listeners, the binary's own files).
	fdMargin = 512
	// idleClientTimeout bounds the client process's dialling and its exit.
	idleClientTimeout = 2 * time.Minute
)

// idlePlan is what the server side of the memory phase sends the idle
// clients' process on its stdin: where to dial and as which devices. The
// process answers "ready N" on stdout once every session is welcomed, then
// holds them until stdin ends.
type idlePlan struct {
	URL     string   `json:"url"`
	Tokens  []string `json:"tokens"`
	Service string   `json:"service"`
	Dialers int      `json:"dialers"`
}

// memoryPhase holds IdleSessions idle sessions against this process's
// gateway, dialled and held by a separate client process (so only the
// server's side is in this process's heap and stacks), reads the memory
// they cost, and then watches them for IdleWindow: a session that wakes
// for anything but its heartbeat shows in the gateway's wake-up counters.
func (d *driver) memoryPhase(ctx context.Context, res *Result) error {
	n := d.cfg.IdleSessions
	m := &res.Memory
	m.Sessions = n
	if len(d.cfg.IdleClientCommand) == 0 {
		return errors.New("no command for the idle clients' process (Config.IdleClientCommand)")
	}
	if d.gw == nil {
		return errors.New("the memory phase needs the gateway in this process (not with --client-only)")
	}
	limit, err := RaiseOpenFiles(uint64(n + fdMargin))
	if err != nil {
		return fmt.Errorf("this process cannot hold %d sessions: %w", n, err)
	}
	m.OpenFilesLimit = limit
	plan := idlePlan{URL: deviceclient.WSURL(d.baseURL, "/v1/provider/ws"), Service: benchService, Dialers: dialers}
	for _, dev := range d.devices[d.cfg.Agents : d.cfg.Agents+n] {
		plan.Tokens = append(plan.Tokens, dev.Token)
	}
	planJSON, err := json.Marshal(plan)
	if err != nil {
		return err
	}
	plan = idlePlan{}
	fmt.Fprintf(d.cfg.Log, "bench: memory: %d idle sessions from a client process (%s)\n", n,
		strings.Join(d.cfg.IdleClientCommand[1:], " "))

	cctx, cancel := context.WithTimeout(ctx, idleClientTimeout+2*idleWindow)
	defer cancel()
	cmd := exec.CommandContext(cctx, d.cfg.IdleClientCommand[0], d.cfg.IdleClientCommand[1:]...)
	cmd.Stderr = d.cfg.Log
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	before, g0 := settledMem()
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start the idle clients' process: %w", err)
	}
	exited := false
	defer func() {
		if !exited {
			_ = stdin.Close()
			_ = cmd.Wait()
		}
	}()
	if _, err := stdin.Write(append(planJSON, '\n')); err != nil {
		return fmt.Errorf("send the plan to the idle clients' process: %w", err)
	}
	planJSON = nil
	lines := bufio.NewScanner(stdout)
	if err := expectLine(lines, "ready", n); err != nil {
		return fmt.Errorf("idle clients' process: %w", err)
	}
	m.DialS = time.Since(t0).Seconds()
	time.Sleep(idleSettle)
	after, g1 := settledMem()
	m.HeapInuseDelta = int64(after.HeapInuse) - int64(before.HeapInuse)
	m.StackInuseDelta = int64(after.StackInuse) - int64(before.StackInuse)
	m.Goroutines = g1 - g0
	m.HeapPerSession = float64(m.HeapInuseDelta) / float64(n)
	m.HeapStackPerSession = float64(m.HeapInuseDelta+m.StackInuseDelta) / float64(n)
	m.GoroutinesPerSession = float64(m.Goroutines) / float64(n)
	m.ServerOnly = true

	w0, p0 := d.gw.Wakeups(), readProcess()
	time.Sleep(idleWindow)
	w1, p1 := d.gw.Wakeups(), readProcess()
	m.WindowS = p1.at.Sub(p0.at).Seconds()
	m.Wakeups = w1.Sub(w0)
	m.IdleWakeups = m.Wakeups.Idle()
	m.IdleWakeupsPerSession = float64(m.IdleWakeups) / float64(n)
	m.GoroutinesCreated = int64(p1.created - p0.created)
	m.CPUms = (p1.cpu - p0.cpu) * 1000
	m.Note = fmt.Sprintf("server side only: a separate process (%s) dialled and held the %d sessions (hello with one "+
		"free slot, then nothing); heap in use and goroutine stacks of this process after GC, before vs after, "+
		"over the sessions; wake-ups are the gateway's per-session counters over a %.1f s idle window "+
		"(frames read, offer passes, notices written; heartbeat pings counted apart), beside this process's "+
		"goroutines created and CPU time in the window", d.cfg.IdleClientCommand[0], n, m.WindowS)

	if err := stdin.Close(); err != nil {
		return err
	}
	exited = true
	if err := expectLine(lines, "closed", n); err != nil {
		_ = cmd.Wait()
		return fmt.Errorf("idle clients' process: %w", err)
	}
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("idle clients' process: %w", err)
	}
	return nil
}

// expectLine reads the client process's next line and wants "word n".
func expectLine(lines *bufio.Scanner, word string, n int) error {
	if !lines.Scan() {
		if err := lines.Err(); err != nil {
			return err
		}
		return fmt.Errorf("ended before %q (its error is on stderr above)", word)
	}
	got := lines.Text()
	if got != word+" "+strconv.Itoa(n) {
		return fmt.Errorf("said %q, want %q", got, word+" "+strconv.Itoa(n))
	}
	return nil
}

// processReading is what the idle window compares.
type processReading struct {
	at      time.Time
	created uint64  // goroutines created so far
	cpu     float64 // user + system CPU seconds so far
}

func readProcess() processReading {
	s := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(s)
	var created uint64
	if s[0].Value.Kind() == metrics.KindUint64 {
		created = s[0].Value.Uint64()
	}
	return processReading{at: time.Now(), created: created, cpu: processCPU()}
}

func settledMem() (runtime.MemStats, int) {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m, runtime.NumGoroutine()
}

// IdleClients is the client process of the memory phase (`rendermac bench
// --idle-clients`): it reads an idle plan from in, dials and hellos every
// session, says "ready N" on out, holds the sessions until in ends, closes
// them and says "closed N". Its sessions answer pings (each client's
// reader does) and send nothing else.
func IdleClients(ctx context.Context, in io.Reader, out, log io.Writer) error {
	r := bufio.NewReader(in)
	line, err := r.ReadBytes('\n')
	if err != nil {
		return fmt.Errorf("read the idle plan: %w", err)
	}
	var plan idlePlan
	if err := json.Unmarshal(line, &plan); err != nil {
		return fmt.Errorf("decode the idle plan: %w", err)
	}
	n := len(plan.Tokens)
	if _, err := RaiseOpenFiles(uint64(n + fdMargin)); err != nil {
		return fmt.Errorf("the idle clients' process cannot hold %d sessions: %w", n, err)
	}
	dctx, cancel := context.WithTimeout(ctx, idleClientTimeout)
	defer cancel()
	clients := make([]*deviceclient.Client, n)
	t0 := time.Now()
	err = loadgen.Parallel(max(plan.Dialers, 1), n, func(i int) error {
		c, resp, err := deviceclient.Dial(dctx, plan.URL, plan.Tokens[i])
		if err != nil {
			if resp != nil {
				return fmt.Errorf("dial session %d: HTTP %d: %w", i, resp.StatusCode, err)
			}
			return fmt.Errorf("dial session %d: %w", i, err)
		}
		clients[i] = c
		if _, err := c.Hello(dctx, []string{plan.Service}, 1, 1); err != nil {
			return fmt.Errorf("hello on session %d: %w", i, err)
		}
		return nil
	})
	defer closeClients(clients)
	if err != nil {
		return err
	}
	fmt.Fprintf(log, "bench: idle clients: %d sessions welcomed in %s\n", n, time.Since(t0).Round(time.Millisecond))
	fmt.Fprintf(out, "ready %d\n", n)
	_, _ = io.Copy(io.Discard, r) // hold until the server side closes stdin
	for i, c := range clients {
		if done, err := c.Closed(); done {
			return fmt.Errorf("session %d ended while idle: %w", i, err)
		}
	}
	closeClients(clients)
	fmt.Fprintf(out, "closed %d\n", n)
	return nil
}

// closeClients closes every session with a normal closure, a few at a
// time; closing one twice does nothing.
func closeClients(clients []*deviceclient.Client) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for _, c := range clients {
		if c == nil {
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			c.Close()
		})
	}
	wg.Wait()
}
