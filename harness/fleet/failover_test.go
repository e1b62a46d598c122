package fleet

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rendermac/rendermac/client"
	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/protocol/buyer"
)

// sessionOpen is one "session open" line of an agent's JSON log.
type sessionOpen struct {
	Time time.Time `json:"time"`
	Msg  string    `json:"msg"`
	URL  string    `json:"url"`
}

// sessions lists the sessions an agent opened, oldest first.
func sessions(t *testing.T, a *agentProc) []sessionOpen {
	t.Helper()
	f, err := os.Open(a.log)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []sessionOpen
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var s sessionOpen
		if json.Unmarshal(sc.Bytes(), &s) == nil && s.Msg == "session open" {
			out = append(out, s)
		}
	}
	return out
}

// gatewayOf is the index of the gateway a session's URL reaches (through
// the agent's path to it).
func gatewayOf(t *testing.T, a *agentProc, s sessionOpen) int {
	t.Helper()
	for i, p := range a.paths {
		if strings.Contains(s.URL, p.Addr()) {
			return i
		}
	}
	t.Fatalf("session URL %s is none of the agent's paths", s.URL)
	return -1
}

// awaitJob polls the job until cond holds or d passes.
func awaitJob(t *testing.T, b *client.Client, id string, d time.Duration, what string, cond func(buyer.JobDetail) bool) buyer.JobDetail {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		job, err := b.Get(ctx, id)
		cancel()
		if err == nil && cond(job) {
			return job
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s: not %s within %s (last: %+v, err %v)", id, what, d, job, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func running(job buyer.JobDetail) bool {
	n := len(job.Attempts)
	return n > 0 && job.Attempts[n-1].Status == protocol.AttemptRunning
}

// TestAgentFailsOverWhenItsGatewayIsKilled runs two real server processes
// and one real agent with --failover. While the agent holds a lease, the
// server process it is connected to is SIGKILLed: the agent must open a
// session on the other within ReconnectBound and the job must finish.
// Then the same with the path to the other gateway down for longer than
// the lease TTL, so the attempt is certainly lost: it must never be
// committed, and the job must finish on a later attempt. The killed server
// is restarted after each.
func TestAgentFailsOverWhenItsGatewayIsKilled(t *testing.T) {
	bin, log, ctx := realProcesses(t, "starts Postgres, two servers and an agent")
	cfg := Config{Bin: bin, Agents: 1, Gateways: 2, Store: StoreFS, Log: log}
	cfg.defaults()
	r := &run{cfg: cfg, httpc: &http.Client{Timeout: 15 * time.Second}}
	defer r.httpc.CloseIdleConnections()
	defer r.close()
	if err := r.setup(ctx); err != nil {
		t.Fatalf("setup: %v\n%s", err, log.String())
	}
	a := r.agents[0]
	bound := ReconnectBound()
	for n, lose := range []bool{false, true} {
		t.Run(fmt.Sprintf("attempt_lost=%v", lose), func(t *testing.T) {
			b, err := r.buyers[0].At(r.gws[n%len(r.gws)].url())
			if err != nil {
				t.Fatal(err)
			}
			created, err := b.Create(ctx, client.CreateRequest{Service: "synthetic.mp4", MaxAttempts: new(3),
				IdempotencyKey: fmt.Sprintf("failover-%d", n),
				Params:         map[string]string{"seed": "1", "delay_ms": "6000", "mdat_bytes": "65536"}})
			if err != nil {
				t.Fatal(err)
			}
			job := created.Job
			awaitJob(t, b, job.ID, time.Minute, "running", running)
			before := sessions(t, a)
			if len(before) == 0 {
				t.Fatal("the agent opened no session")
			}
			k := gatewayOf(t, a, before[len(before)-1])
			other := 1 - k
			if b, err = b.At(r.gws[other].url()); err != nil {
				t.Fatal(err)
			}
			r.gws[k].kill()
			killed := time.Now()
			if lose {
				a.paths[other].BlackHole()
				time.Sleep(leaseTTL + 2*time.Second)
				a.paths[other].Heal()
				killed = time.Now() // the bound runs from when a gateway can be reached
			}
			var moved *sessionOpen
			for moved == nil {
				for _, s := range sessions(t, a)[len(before):] {
					if gatewayOf(t, a, s) == other {
						moved = &s
						break
					}
				}
				if moved == nil && time.Since(killed) > bound {
					t.Fatalf("no session on gateway %d within %s of gateway %d's SIGKILL (bound %s)\n%s", other,
						time.Since(killed).Round(time.Millisecond), k, bound, log.String())
				}
				time.Sleep(50 * time.Millisecond)
			}
			took := moved.Time.Sub(killed)
			t.Logf("gateway %d killed; the agent opened a session on gateway %d %s later (bound %s)", k, other,
				took.Round(time.Millisecond), bound)
			done := awaitJob(t, b, job.ID, 2*time.Minute, "succeeded", func(j buyer.JobDetail) bool {
				return j.Status == protocol.JobSucceeded
			})
			alog, err := readAgentLog(a.idx, a.log)
			if err != nil {
				t.Fatal(err)
			}
			for _, at := range done.Attempts {
				okd := slices.Contains(alog.commitOK, at.ID)
				if okd != (at.Status == protocol.AttemptSucceeded) {
					t.Errorf("attempt %d (%s) is %s, and the agent heard commit_ok for it: %v", at.Number, at.ID, at.Status, okd)
				}
				if sent, ok := alog.committedAt[at.ID]; ok && at.Status == protocol.AttemptLost {
					t.Errorf("attempt %d (%s) was lost, yet the agent sent a commit for it at %s", at.Number, at.ID, sent)
				}
			}
			if lose && (len(done.Attempts) < 2 || done.Attempts[0].Status != protocol.AttemptLost) {
				t.Errorf("the lease outlived the outage: want attempt 1 lost and a later one succeeded, got %+v", done.Attempts)
			}
			var ends []string
			for _, at := range done.Attempts {
				ends = append(ends, fmt.Sprintf("%d %s %s", at.Number, at.Status, at.FailureCode))
			}
			t.Logf("job %s succeeded; attempts: %s", job.ID, strings.Join(ends, "; "))
			if err := r.gws[k].start(); err != nil {
				t.Fatal(err)
			}
			if err := r.waitReady(ctx, r.gws[k].url(), time.Minute); err != nil {
				t.Fatal(err)
			}
		})
	}
}
