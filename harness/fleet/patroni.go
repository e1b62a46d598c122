package fleet

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rendermac/rendermac/internal/patroniprovider"
	"github.com/rendermac/rendermac/server/store"
)

// The Postgres a fleet run gives its gateways (Config.Postgres).
const (
	// PostgresLocal is one embedded cluster, crashed and restarted in
	// place (the postgres crash fault).
	PostgresLocal = "local"
	// PostgresPatroni is a three-node cluster under Patroni and etcd
	// (internal/patroniprovider), synchronous_mode on, the gateways given a
	// multi-host URL; its faults are the primary kill and the switchover.
	PostgresPatroni = "patroni"
)

// Postgreses lists Config.Postgres's values.
func Postgreses() []string { return []string{PostgresLocal, PostgresPatroni} }

// PGVariantAsyncHoldback is the broken cluster (Config.PGVariant):
// asynchronous replication, any standby promotable, and every primary
// kill preceded by the WAL hold-back, so the standby promoted lacks
// commits the control plane acknowledged. The run must fail, naming them.
const PGVariantAsyncHoldback = "async_holdback"

// PGVariants lists Config.PGVariant's values ("" is the synchronous cluster).
func PGVariants() []string { return []string{"", PGVariantAsyncHoldback} }

// PatroniAvailable says whether this machine can run a Patroni fleet:
// nil, or an error naming what is missing and how to install it.
func PatroniAvailable() error {
	for _, bin := range []string{"patroni", "etcd"} {
		if _, err := exec.LookPath(bin); err != nil {
			return fmt.Errorf("%w: no %s on PATH; install it with `%s`", patroniprovider.ErrNoPatroni, bin,
				patroniprovider.InstallCommand)
		}
	}
	return nil
}

// holdBackBound is how long a primary kill holds the standbys' WAL back
// waiting for a job's success to become visible on the primary (which,
// with synchronous replication, it cannot before the standby has it: the
// commit waits); holdBackSettle lets the gateway write the commit_ok it
// then sends before the kill.
const (
	holdBackBound      = 2 * time.Second
	asyncHoldBackBound = 15 * time.Second
	holdBackSettle     = 300 * time.Millisecond
)

// PrimaryLoss is one primary the fleet took away: killed or switched over.
type PrimaryLoss struct {
	Kind     string
	From, To string // Patroni member names
	At       time.Time
	// HeldBack says whether the standbys' WAL was held back before the
	// kill, and Visible whether a job's success became visible on the
	// primary meanwhile (acknowledged, so its standbys lacked an
	// acknowledged commit when it died).
	HeldBack, Visible bool
	// FirstCommit is when the first job succeeded after At (the journal's
	// database clock); zero when none did.
	FirstCommit time.Time
}

// Outage is the time from the loss to the first committed job after it
// (0 when none committed).
func (p PrimaryLoss) Outage() time.Duration {
	if p.FirstCommit.IsZero() {
		return 0
	}
	return p.FirstCommit.Sub(p.At)
}

// patroniState is what a Patroni run keeps beside the run.
type patroniState struct {
	cluster *patroniprovider.Cluster
	mu      sync.Mutex
	losses  []PrimaryLoss
}

// openPatroni starts the cluster (synchronous, or the broken variant),
// creates the run's database and migrates it; r.dbURL is then the
// multi-host URL the gateways get.
func (r *run) openPatroni(ctx context.Context) error {
	opts := patroniprovider.Options{BaseDir: "", ReplicationProxy: true, Log: r.cfg.Log,
		Asynchronous: r.cfg.PGVariant == PGVariantAsyncHoldback}
	c, err := patroniprovider.Open(ctx, opts)
	if err != nil {
		return err
	}
	r.pat = &patroniState{cluster: c}
	leader, err := c.Leader(ctx)
	if err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, c.NodeURL(leader, "postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "CREATE DATABASE fleet"); err != nil {
		return err
	}
	// pgx tries the next host of a multi-host URL after a refused or
	// read-only connection, but not after "database does not exist": a
	// standby that has not replayed CREATE DATABASE yet would end the
	// search, so every node must have it first.
	if err := r.awaitDatabaseOnEveryNode(ctx, "fleet"); err != nil {
		return err
	}
	r.dbURL = c.URL("fleet")
	return store.Migrate(ctx, r.dbURL)
}

func (r *run) awaitDatabaseOnEveryNode(ctx context.Context, db string) error {
	// The last node may still be cloning (patroniprovider.Open returns
	// once the cluster serves): a loaded machine took minutes.
	deadline := time.Now().Add(3 * time.Minute)
	for i := range patroniprovider.Nodes {
		for {
			conn, err := pgx.Connect(ctx, r.pat.cluster.NodeURL(i, db))
			if err == nil {
				conn.Close(context.Background())
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("database %s not on node %d within 3 minutes: %w", db, i, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return nil
}

// primaryKill holds the leader's standbys' WAL back until a job's success
// is visible on it (or holdBackBound passes), SIGKILLs its Patroni and
// Postgres, waits for Patroni to promote a standby, lets the WAL through
// again, and after outage restarts the node, which rejoins as a standby.
// The heal waits for the whole cluster, synchronous standby included.
func (r *run) primaryKill(ctx context.Context, outage time.Duration) error {
	c := r.pat.cluster
	leader, err := c.Leader(ctx)
	if err != nil {
		return err
	}
	loss := PrimaryLoss{Kind: FaultPrimaryKill, From: c.Name(leader), HeldBack: true}
	if err := c.HoldBack(leader); err != nil {
		return err
	}
	defer c.Release(leader)
	bound := holdBackBound
	if r.cfg.PGVariant == PGVariantAsyncHoldback {
		// Nothing waits for the standbys here: waiting longer costs no
		// throughput and makes sure the kill has an acknowledgement to lose.
		bound = asyncHoldBackBound
	}
	loss.Visible = r.awaitVisibleSuccess(ctx, leader, bound)
	if loss.Visible {
		time.Sleep(holdBackSettle)
	}
	loss.At = time.Now()
	if _, err := c.KillLeader(ctx); err != nil {
		return err
	}
	fmt.Fprintf(r.cfg.Log, "fleet: primary %s killed (success visible during hold-back: %v)\n", loss.From, loss.Visible)
	next, err := r.awaitNewLeader(ctx, leader)
	if err != nil {
		return err
	}
	c.Release(leader)
	loss.To = c.Name(next)
	r.pat.add(loss)
	time.Sleep(outage)
	if err := c.StartNode(leader); err != nil {
		return err
	}
	return r.awaitServing(ctx)
}

// switchover is a planned switchover to the synchronous standby.
func (r *run) switchover(ctx context.Context) error {
	c := r.pat.cluster
	at := time.Now()
	from, to, err := c.Switchover(ctx)
	if err != nil {
		return err
	}
	r.pat.add(PrimaryLoss{Kind: FaultSwitchover, From: c.Name(from), To: c.Name(to), At: at})
	return r.awaitServing(ctx)
}

// awaitServing waits for a leader and a synchronous standby: what the
// next fault needs. A killed node may still be rejoining; the run's last
// heal waits for it (awaitHealthy).
func (r *run) awaitServing(ctx context.Context) error {
	hctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	return r.pat.cluster.WaitServing(hctx)
}

// awaitHealthy waits for the whole cluster: every killed node rejoined.
func (r *run) awaitHealthy(ctx context.Context) error {
	hctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	return r.pat.cluster.WaitHealthy(hctx)
}

// awaitNewLeader waits until Patroni names a leader other than old.
func (r *run) awaitNewLeader(ctx context.Context, old int) (int, error) {
	deadline := time.Now().Add(time.Minute)
	for {
		if l, err := r.pat.cluster.Leader(ctx); err == nil && l != old {
			return l, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return -1, errors.New("no standby was promoted within a minute of the primary's kill")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// awaitVisibleSuccess polls node i until a job succeeded there after the
// call began (the journal's last job success moved on), or d passes.
func (r *run) awaitVisibleSuccess(ctx context.Context, i int, d time.Duration) bool {
	cctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	conn, err := pgx.Connect(cctx, r.pat.cluster.NodeURL(i, "fleet"))
	if err != nil {
		return false
	}
	defer conn.Close(context.Background())
	const q = `SELECT coalesce(max(id), 0) FROM job_events WHERE kind = 'job' AND to_status = 'succeeded'`
	var mark, now int64
	if conn.QueryRow(cctx, q).Scan(&mark) != nil {
		return false
	}
	for {
		if conn.QueryRow(cctx, q).Scan(&now) != nil {
			return false
		}
		if now > mark {
			return true
		}
		select {
		case <-cctx.Done():
			return false
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (p *patroniState) add(l PrimaryLoss) {
	p.mu.Lock()
	p.losses = append(p.losses, l)
	p.mu.Unlock()
}

// primaryLosses returns the run's losses, each with the first job success
// after it from the journal.
func (r *run) primaryLosses(ctx context.Context) ([]PrimaryLoss, error) {
	if r.pat == nil {
		return nil, nil
	}
	r.pat.mu.Lock()
	out := append([]PrimaryLoss(nil), r.pat.losses...)
	r.pat.mu.Unlock()
	for i := range out {
		var first *time.Time
		if err := r.obs.QueryRow(ctx, `SELECT min(at) FROM job_events WHERE kind = 'job' AND to_status = 'succeeded' AND at > $1`,
			out[i].At).Scan(&first); err != nil {
			return nil, err
		}
		if first != nil {
			out[i].FirstCommit = *first
		}
	}
	return out, nil
}
