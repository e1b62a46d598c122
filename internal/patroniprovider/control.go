package patroniprovider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rendermac/rendermac/internal/pgprovider"
)

// Member is one node as Patroni's REST API (GET /cluster) describes it.
type Member struct {
	Name  string `json:"name"`
	Role  string `json:"role"`  // "leader", "sync_standby", "replica"
	State string `json:"state"` // "running", "streaming", "starting", ...
	Host  string `json:"host"`
	Port  int    `json:"port"`
	// Timeline is the node's timeline: one more after each promotion.
	Timeline int `json:"timeline"`
}

// Members asks any node that answers for the cluster's members.
func (c *Cluster) Members(ctx context.Context) ([]Member, error) {
	var last error
	for _, n := range c.nodes {
		var cl struct {
			Members []Member `json:"members"`
		}
		if last = c.get(ctx, n.rest("/cluster"), &cl); last == nil {
			return cl.Members, nil
		}
	}
	return nil, fmt.Errorf("no Patroni REST API answered: %w", last)
}

// Leader is the index of the node Patroni's leader key names.
func (c *Cluster) Leader(ctx context.Context) (int, error) {
	ms, err := c.Members(ctx)
	if err != nil {
		return -1, err
	}
	for _, m := range ms {
		if m.Role == "leader" {
			return c.index(m.Name)
		}
	}
	return -1, errors.New("the cluster has no leader")
}

func (c *Cluster) index(name string) (int, error) {
	for _, n := range c.nodes {
		if n.name == name {
			return n.idx, nil
		}
	}
	return -1, fmt.Errorf("no node named %q", name)
}

// KillLeader SIGKILLs the leader's Patroni and then its postmaster and
// every backend, and returns the node's index. The node stays down until
// StartNode.
func (c *Cluster) KillLeader(ctx context.Context) (int, error) {
	i, err := c.Leader(ctx)
	if err != nil {
		return -1, err
	}
	c.killNode(c.nodes[i])
	return i, nil
}

// killNode kills node n's Patroni, so that nothing restarts its Postgres,
// then its postmaster and backends, and waits until they are gone.
func (c *Cluster) killNode(n *node) {
	n.mu.Lock()
	p := n.patroni
	n.patroni = nil
	n.mu.Unlock()
	if p != nil {
		p.kill()
	}
	pid := postmasterPID(filepath.Join(n.dir, "data"))
	if pid <= 0 {
		return
	}
	pgprovider.KillTree(pid)
	deadline := time.Now().Add(10 * time.Second)
	for pgprovider.ProcessAlive(pid) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
}

// postmasterPID reads the first line of dataDir/postmaster.pid (0: none).
func postmasterPID(dataDir string) int {
	b, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		return 0
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, _ := strconv.Atoi(strings.TrimSpace(first))
	return pid
}

// StartNode starts node i's Patroni (a no-op while it runs). A node that
// was killed as the leader rejoins as a standby of the new one.
func (c *Cluster) StartNode(i int) error {
	n := c.nodes[i]
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.patroni != nil && !n.patroni.exited() {
		return nil
	}
	p := &child{name: n.name, path: c.patroni, args: []string{n.conf}, log: n.log,
		env: []string{"HOME=" + n.dir, "LC_ALL=C.UTF-8", "LANG=C.UTF-8"}, dir: n.dir}
	attr, _, _, err := pgprovider.ServerProcAttr()
	if err != nil {
		return err
	}
	if err := p.start(attr); err != nil {
		return err
	}
	n.patroni = p
	return nil
}

// Down lists the nodes whose Patroni is not running.
func (c *Cluster) Down() []int {
	var out []int
	for _, n := range c.nodes {
		n.mu.Lock()
		if n.patroni == nil || n.patroni.exited() {
			out = append(out, n.idx)
		}
		n.mu.Unlock()
	}
	return out
}

// Switchover asks the leader's Patroni for a planned switchover to the
// synchronous standby (any running replica in asynchronous mode), what
// `patronictl switchover` sends, and waits for Patroni's answer; it
// returns the old and the new leader's index.
func (c *Cluster) Switchover(ctx context.Context) (from, to int, err error) {
	ms, err := c.Members(ctx)
	if err != nil {
		return -1, -1, err
	}
	var leader, candidate string
	for _, m := range ms {
		switch {
		case m.Role == "leader":
			leader = m.Name
		case m.Role == "sync_standby" || (c.opts.Asynchronous && candidate == "" && m.State == "running"):
			candidate = m.Name
		}
	}
	if leader == "" || candidate == "" {
		return -1, -1, fmt.Errorf("no leader and candidate for a switchover: %+v", ms)
	}
	from, _ = c.index(leader)
	to, _ = c.index(candidate)
	body, _ := json.Marshal(map[string]string{"leader": leader, "candidate": candidate})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, c.nodes[from].rest("/switchover"), bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	hc := &http.Client{Timeout: 60 * time.Second}
	resp, err := hc.Do(req)
	if err != nil {
		return from, to, fmt.Errorf("switchover %s -> %s: %w", leader, candidate, err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return from, to, fmt.Errorf("switchover %s -> %s: %s: %s", leader, candidate, resp.Status, strings.TrimSpace(string(msg)))
	}
	return from, to, nil
}

// WaitHealthy waits until Patroni reports a leader that takes writes,
// every node running, and (in synchronous mode) a synchronous standby, or
// ctx ends.
func (c *Cluster) WaitHealthy(ctx context.Context) error { return c.wait(ctx, true) }

// WaitServing waits until Patroni reports a leader that takes writes and
// (in synchronous mode) a synchronous standby, or ctx ends: a node that
// is still rejoining does not hold it up.
func (c *Cluster) WaitServing(ctx context.Context) error { return c.wait(ctx, false) }

func (c *Cluster) wait(ctx context.Context, all bool) error {
	var why string
	for {
		if why = c.unhealthy(ctx, all); why == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %s%s", ctx.Err(), why, c.logTails())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// logTails is, for a wait that timed out, the last lines of the Patroni log
// of every node, so the error says why a node did not come back.
func (c *Cluster) logTails() string {
	var b strings.Builder
	for _, n := range c.nodes {
		data, err := os.ReadFile(n.log)
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		lines = lines[max(0, len(lines)-4):]
		fmt.Fprintf(&b, "\n--- %s (%s), last lines:\n%s", n.name, n.log, strings.Join(lines, "\n"))
	}
	return b.String()
}

// unhealthy says what keeps the cluster from being healthy ("" when it is).
func (c *Cluster) unhealthy(ctx context.Context, all bool) string {
	ms, err := c.Members(ctx)
	if err != nil {
		return err.Error()
	}
	leader, sync, running := "", 0, 0
	for _, m := range ms {
		if m.State == "running" || m.State == "streaming" {
			running++
		}
		switch m.Role {
		case "leader":
			leader = m.Name
		case "sync_standby":
			sync++
		}
	}
	switch {
	case leader == "":
		return fmt.Sprintf("no leader: %+v", ms)
	case all && running < Nodes:
		return fmt.Sprintf("%d of %d nodes running: %+v", running, Nodes, ms)
	case !c.opts.Asynchronous && sync == 0:
		return fmt.Sprintf("no synchronous standby: %+v", ms)
	}
	i, _ := c.index(leader)
	cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	conn, err := pgx.Connect(cctx, c.NodeURL(i, "postgres"))
	if err != nil {
		return "leader " + leader + ": " + err.Error()
	}
	defer conn.Close(context.Background())
	var recovery bool
	if err := conn.QueryRow(cctx, "SELECT pg_is_in_recovery()").Scan(&recovery); err != nil || recovery {
		return fmt.Sprintf("leader %s does not take writes yet (in recovery %v, %v)", leader, recovery, err)
	}
	return ""
}

// HoldBack silences every connection other nodes hold to node i (its
// standbys' WAL streams) and refuses new ones until Release: node i
// keeps committing, and its standbys no longer hear of it. It needs
// Options.ReplicationProxy.
func (c *Cluster) HoldBack(i int) error {
	p := c.nodes[i].proxy
	if p == nil {
		return errors.New("patroniprovider: HoldBack needs Options.ReplicationProxy")
	}
	p.BlackHole()
	return nil
}

// Release lets connections to node i through again after HoldBack.
func (c *Cluster) Release(i int) {
	if p := c.nodes[i].proxy; p != nil {
		p.Heal()
	}
}

func (n *node) rest(path string) string {
	return fmt.Sprintf("http://127.0.0.1:%d%s", n.restPort, path)
}

// get GETs url and decodes its JSON into v (nil: only the status counts).
func (c *Cluster) get(ctx context.Context, url string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	if v == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(v)
}
