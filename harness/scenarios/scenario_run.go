package scenarios

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rendermac/rendermac/harness/evidence"
	"github.com/rendermac/rendermac/harness/targets"
	"github.com/rendermac/rendermac/internal/clock"
	"github.com/rendermac/rendermac/internal/tcpproxy"
	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/api"
	"github.com/rendermac/rendermac/server/artifact"
	"github.com/rendermac/rendermac/server/faultpoint"
	"github.com/rendermac/rendermac/server/fencing"
	"github.com/rendermac/rendermac/server/store"
)

// The world every scenario starts from: one buyer with an API key, the
// pinned clock at scT0, a 30s lease. Devices are created by `connect`.
const (
	scBuyerID      = "00000000-0000-4000-8000-0000000000b1"
	scBuyerBalance = 100000
	scService      = "synthetic.mp4"
	scLeaseTTL     = 30 * time.Second
)

var scT0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// scCommand runs one step.
type scCommand func(r *scRun, st scStep) error

// scCommands maps every command of the script language to its handler.
// It is filled in init to break the initialisation cycle through parsing.
var scCommands = map[string]scCommand{}

func init() {
	for name, h := range map[string]scCommand{
		// scenario_agent.go
		"connect": cmdConnect, "drop": cmdDrop, "close": cmdClose, "slots": cmdSlots, "progress": cmdProgress, "commit": cmdCommit,
		"fail": cmdFail, "upload": cmdUpload, "expect": cmdExpect, "nothing": cmdNothing,
		// scenario_realagent.go
		"agent": cmdAgent,
		// scenario_control.go
		"create": cmdCreate, "cancel": cmdCancel, "advance": cmdAdvance, "sweep": cmdSweep, "gateway": cmdGateway,
		"store": cmdStore, "postgres": cmdPostgres, "proxy": cmdProxy, "pool": cmdPool, "db": cmdDB, "arm": cmdArm, "await": cmdAwait,
		"release": cmdRelease, "race": cmdRace,
		// scenario_concurrent.go
		"created": cmdCreated, "funds": cmdFunds, "register": cmdRegister, "lease": cmdLease, "leased": cmdLeased,
		// scenario_probe.go
		"intruder": cmdIntruder, "grants": cmdGrants, "constraint": cmdConstraint, "webhooks": cmdWebhooks,
		"webhook-endpoint": cmdWebhookEndpoint,
		// scenario_check.go
		"job": cmdJob, "final": cmdFinal, "buyer": cmdBuyer, "tokens": cmdTokens, "device": cmdDevice,
		"reached": cmdReached,
	} {
		scCommands[name] = h
	}
}

// scRun is one execution of one scenario.
type scRun struct {
	ctx     context.Context
	cancel  context.CancelFunc
	env     *Env
	s       Scenario
	timeout time.Duration
	// fp is the fault points of this run's services alone: qualify runs
	// the scenarios in the process that runs the campaigns, whose services
	// hit the process's registry.
	fp *faultpoint.Points

	pg       *targets.Postgres
	dbURL    string
	observer *pgxpool.Pool    // the harness's own pool, never through the proxy
	admin    *fencing.Service // admin operations and the race, on observer
	clock    *clock.Stub
	// jobIDSource draws every stack's job ids, in creation order (orderedIDs).
	jobIDSource *orderedIDs
	store       *scStore
	fs          *artifact.FS // the filesystem store, unless s3
	s3          *s3Run       // the run's S3 server and store, with EnvOptions.ArtifactsS3
	dir         string
	proxy       *tcpproxy.Proxy
	apiKey      string
	httpc       *http.Client
	stacks      map[string]*scStack
	agents      map[string]*scAgent
	real        map[string]*scRealAgent // shipped agents in process (`agent start`)
	// gwURLs are the session URLs of the running stacks by name, for the
	// shipped agents' relays, which dial them from their own goroutines.
	gwURLs sync.Map
	pgDown bool
	// syncSilent is set while `db standby-silent` holds every commit.
	syncSilent bool
	hook       *scWebhookEndpoint // cmdWebhookEndpoint's receiver
	surface    *scSurface         // scenario_http.go's commands
	vf         *scVerify          // the catalogue and ffprobe slot (scenario_verify.go)
	tls        *scTLS             // scenario_tls.go's commands
	ops        *scOps             // scenario_limits.go's, scenario_console.go's and scenario_serve.go's commands
	txns       map[string]*scTxn  // the harness's own transactions (`txn`, scenario_core.go)
	// sweptAt is when the last sweep command returned (wall time), for
	// `expect ... within=`.
	sweptAt time.Time

	mu    sync.Mutex
	names map[string]string // uuid -> display name (j1, j1#2, a1)
	// named, when not nil, is closed at the next setName (awaitName).
	named chan struct{}
	jobs  map[string]string // job display name -> uuid
	// intruderKeys are the API keys of cmdIntruder, by who.
	intruderKeys map[string]string
	offers       map[string]*protocol.LeaseOffer // attempt display name -> offer
	outputs      map[string]protocol.Output      // attempt id -> what its agent uploaded
	counters     map[string]int64
	logs         []scLogLine
	logText      []string // every record of every process, rendered whole, for the secrets check
	blocks       map[string]chan struct{}
	pending      map[string]*scPending // background operations, by name
	devices      map[string]string     // device display name -> id (`device`)
	kept         map[string]scLink     // download URLs kept by `link` (scenario_prune.go)

	tl         scTimeline
	journalSeq int64
	replies    []string
	finals     []string
	marksTotal int
	marksOK    int
}

func newRun(ctx context.Context, env *Env, s Scenario) *scRun {
	ctx, cancel := context.WithCancel(ctx)
	r := &scRun{ctx: ctx, cancel: cancel, env: env, s: s, timeout: env.opts.FrameTimeout, fp: faultpoint.New(),
		httpc:  &http.Client{Timeout: env.opts.FrameTimeout},
		stacks: map[string]*scStack{}, agents: map[string]*scAgent{},
		names: map[string]string{}, jobs: map[string]string{}, intruderKeys: map[string]string{}, offers: map[string]*protocol.LeaseOffer{},
		outputs: map[string]protocol.Output{}, counters: map[string]int64{}, blocks: map[string]chan struct{}{},
		pending: map[string]*scPending{}, devices: map[string]string{}}
	for _, st := range s.steps {
		if st.cmd == "reached" && r.applies(st) {
			r.marksTotal++
		}
	}
	// A commit's verification may run ffprobe for up to its timeout (a
	// slow start on a loaded machine is not a failure), so every wait of a
	// scenario that runs it allows for that too.
	r.timeout += s.ffprobeTimeout
	return r
}

// execute sets the world up, runs every step (stopping at the first that
// fails), takes the stacks down, and checks SPEC section 4 over every row.
func (r *scRun) execute() error {
	defer r.cleanup()
	if err := r.setup(); err != nil {
		return fmt.Errorf("setup: %w", err)
	}
	var stepErr error
	for _, st := range r.s.steps {
		if err := r.ctx.Err(); err != nil {
			stepErr = err
			break
		}
		if !r.applies(st) {
			continue
		}
		err := scCommands[st.cmd](r, st)
		r.pollJournal()
		if err != nil {
			stepErr = fmt.Errorf("%s: %w", st, err)
			r.tl.add(laneAgent, "FAILED "+st.String()+": "+err.Error())
			break
		}
	}
	// A failed step may leave commits waiting for a synchronous standby
	// that never confirms: lift the requirement first, or quiescing waits
	// for them forever.
	if r.syncSilent {
		_ = r.syncStandby(false)
	}
	// Quiesce before judging the rows: the invariant queries are not one
	// snapshot, so no writer may run between them.
	r.releaseBlocks()
	r.waitPending()
	// Shipped agents stop first, while their gateway still answers their
	// shutdown's fail frames; their wire is judged once it is complete.
	wireErr := r.stopRealAgents()
	r.closeAgents()
	r.stopStacks()
	r.pollJournal()
	return errors.Join(stepErr, wireErr, r.checkInvariants(), r.checkSecretsNotLogged())
}

func (r *scRun) setup() error {
	ctx := r.ctx
	r.pg = r.env.pg
	if r.s.pg == "dedicated" {
		pg, err := r.env.dedicatedPostgres(ctx)
		if err != nil {
			return err
		}
		r.pg = pg
	}
	url, err := r.pg.NewDatabase(ctx)
	if err != nil {
		return err
	}
	r.dbURL = url
	if r.observer, err = store.OpenPool(ctx, url); err != nil {
		return err
	}
	if r.dir, err = os.MkdirTemp("", "rendermac-scenario-"); err != nil {
		return err
	}
	if err := r.setupVerify(); err != nil {
		return err
	}
	var raw artifact.Store
	if r.env.opts.ArtifactsS3 {
		if r.s3, err = openS3(ctx); err != nil {
			return err
		}
		raw = r.s3.store
	} else {
		fs, err := artifact.NewFS(r.dir)
		if err != nil {
			return err
		}
		r.fs, raw = fs, fs
	}
	r.store = &scStore{Store: raw, raw: raw, bitflip: r.env.opts.HarnessVariant == VariantStoreBitflip,
		dropWhenFull: r.env.opts.HarnessVariant == VariantStoreDropsWhenFull, unsealed: r.env.opts.HarnessVariant == VariantUnsealedOutputs, r: r}
	if r.s.pg == "proxy" {
		if r.proxy, err = tcpproxy.New(hostPort(url)); err != nil {
			return err
		}
	}
	r.clock = clock.NewStub(scT0)
	r.jobIDSource = &orderedIDs{}
	r.admin = fencing.NewService(r.observer, r.served(), protocol.RandomIDs{Jobs: r.jobIDSource, Attempts: rand.Reader,
		Tokens: rand.Reader}, r.serviceConfig())
	if err := r.admin.CreateBuyer(ctx, scBuyerID, "scenario buyer", scBuyerBalance); err != nil {
		return err
	}
	if r.apiKey, err = api.CreateAPIKey(ctx, r.observer, scBuyerID); err != nil {
		return err
	}
	r.tl.add(laneDatabase, fmt.Sprintf("fresh database on %s postgres; buyer with %d cents", r.s.pg, scBuyerBalance))
	_, err = r.startStack("gw1")
	return err
}

func (r *scRun) cleanup() {
	r.releaseBlocks()
	r.fpClear()
	_ = r.stopRealAgents() // after a failed setup or step: already stopped otherwise
	r.closeAgents()
	r.stopStacks()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if r.pgDown {
		_ = r.pg.Provider.Start(ctx)
	}
	if r.proxy != nil {
		r.proxy.Close()
	}
	if r.hook != nil {
		r.hook.srv.Close()
	}
	r.surface.close()
	r.vf.close()
	r.tls.close()
	r.ops.close()
	r.closeTxns()
	if r.observer != nil {
		r.observer.Close()
	}
	if r.dbURL != "" {
		_ = r.pg.Provider.DropDatabase(ctx, r.dbURL)
	}
	if r.fs != nil {
		_ = r.fs.Close()
	}
	if r.s3 != nil {
		r.s3.close()
	}
	if r.dir != "" {
		_ = os.RemoveAll(r.dir)
	}
	r.cancel()
}

func (r *scRun) checkInvariants() error {
	if r.observer == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	vs, err := store.CheckInvariants(ctx, r.observer)
	if err != nil {
		return fmt.Errorf("check SPEC section 4 invariants: %w", err)
	}
	// Invariant 8 over the bytes: what the store holds (read directly, past
	// any injected outage or bit flip) is what every succeeded job recorded.
	outs, err := store.CheckOutputs(ctx, r.observer, r.checked())
	if err != nil {
		return fmt.Errorf("check stored outputs: %w", err)
	}
	vs = append(vs, outs...)
	if len(vs) == 0 {
		r.tl.add(laneDatabase, "SPEC section 4 invariants hold over every row and every succeeded job's stored output")
		return nil
	}
	msgs := make([]string, len(vs))
	for i, v := range vs {
		msgs[i] = v.String()
	}
	r.tl.add(laneDatabase, "INVARIANTS BROKEN: "+strings.Join(msgs, "; "))
	return fmt.Errorf("SPEC section 4 violated: %s", strings.Join(msgs, "; "))
}

// leaseTTL is the run's lease TTL: the script's `lease-ttl:` or scLeaseTTL.
func (r *scRun) leaseTTL() time.Duration {
	if r.s.leaseTTL > 0 {
		return r.s.leaseTTL
	}
	return scLeaseTTL
}

// serviceConfig is the service layer every stack of this run uses, broken
// as the Env's server or harness variant says.
func (r *scRun) serviceConfig() fencing.Config {
	cfg := fencing.Config{LeaseTTL: r.leaseTTL(), Variant: r.env.opts.ServerVariant, FaultPoints: r.fp}
	if r.vf != nil {
		cfg.Services, cfg.Prober = r.vf.services, r.vf.prober
	}
	switch r.env.opts.HarnessVariant {
	case VariantLeaseTTLMismatch:
		cfg.LeaseTTL = 10 * r.leaseTTL()
	case VariantNoMediaCheck:
		services := cfg.Services
		if services == nil {
			services = protocol.Services
		}
		cfg.Services = nil
		for _, sv := range services {
			if sv.Name == scService {
				sv.Media = artifact.MediaNone
			}
			cfg.Services = append(cfg.Services, sv)
		}
	}
	return cfg
}

// name renders an id as the script calls it.
func (r *scRun) name(id string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if n, ok := r.names[id]; ok {
		return n
	}
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

func (r *scRun) setName(id, name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.names[id] = name
	if r.named != nil {
		close(r.named)
		r.named = nil
	}
}

// awaitName returns once id has a name, or after the frame timeout.
func (r *scRun) awaitName(id string) {
	deadline := time.NewTimer(r.timeout)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		if _, ok := r.names[id]; ok {
			r.mu.Unlock()
			return
		}
		if r.named == nil {
			r.named = make(chan struct{})
		}
		ch := r.named
		r.mu.Unlock()
		select {
		case <-ch:
		case <-deadline.C:
			return
		}
	}
}

// count adds n to a named counter that `reached counter` can test.
func (r *scRun) count(name string, n int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.counters[name] += n
}

func (r *scRun) counter(name string) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.counters[name]
}

func (r *scRun) reply(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.replies = append(r.replies, s)
}

// jobID resolves a job's script name.
func (r *scRun) jobID(name string) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	id, ok := r.jobs[name]
	if !ok {
		return "", fmt.Errorf("no job %q was created", name)
	}
	return id, nil
}

// pollJournal appends the journal rows written since the last poll to the
// database lane, so the timeline interleaves them with the steps.
func (r *scRun) pollJournal() {
	if r.observer == nil || r.pgDown {
		return
	}
	ctx, cancel := context.WithTimeout(r.ctx, 2*time.Second)
	defer cancel()
	rows, err := r.observer.Query(ctx, `
SELECT id, kind, job_id::text, coalesce(attempt_id::text, ''), coalesce(from_status, ''), to_status, code, actor
FROM job_events WHERE id > $1 ORDER BY id LIMIT 500`, r.journalSeq)
	if err != nil {
		return
	}
	defer rows.Close()
	for rows.Next() {
		var seq int64
		var kind, job, att, from, to, code, actor string
		if rows.Scan(&seq, &kind, &job, &att, &from, &to, &code, &actor) != nil {
			return
		}
		r.journalSeq = seq
		if from == "" {
			from = "new"
		}
		r.tl.addLazy(laneDatabase, func() string {
			who := r.name(job)
			if kind == "attempt" {
				who = r.name(att)
			}
			label := fmt.Sprintf("%s %s -> %s (%s)", who, from, to, actor)
			if code != "" {
				label += " " + code
			}
			return label
		})
	}
}

// observed renders what the run saw, in the terms of Expected: the replies
// the scripts asserted and the final rows, or where it failed.
func (r *scRun) observed(err error) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var parts []string
	if len(r.replies) > 0 {
		parts = append(parts, strings.Join(dedupe(r.replies), ", "))
	}
	parts = append(parts, r.finals...)
	out := strings.Join(parts, "; ")
	if err != nil {
		msg := err.Error()
		if len(msg) > 400 {
			msg = msg[:400] + "..."
		}
		if out != "" {
			return "FAILED: " + msg + " (before that: " + out + ")"
		}
		return "FAILED: " + msg
	}
	return out
}

func dedupe(in []string) []string {
	var out []string
	for _, s := range in {
		if len(out) == 0 || out[len(out)-1] != s {
			out = append(out, s)
		}
	}
	return out
}

// Timeline lanes of evidence.TimelineEvent.
const (
	laneAgent    = "agent"
	laneGateway  = "gateway"
	laneDatabase = "database"
)

// scTimelineMax bounds a timeline; the race scenario would otherwise put
// thousands of journal rows on the card.
const scTimelineMax = 300

// scTimeline collects a run's events in the order they happened. A label
// may be rendered late (addLazy), so that an id logged before the script
// learnt its name (an offer's attempt) still shows as j1#1.
type scTimeline struct {
	mu      sync.Mutex
	list    []scEvent
	dropped int
}

type scEvent struct {
	lane  string
	label func() string
}

func (t *scTimeline) add(lane, label string) {
	t.addLazy(lane, func() string { return label })
}

func (t *scTimeline) addLazy(lane string, label func() string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.list) >= scTimelineMax {
		t.dropped++
		return
	}
	t.list = append(t.list, scEvent{lane: lane, label: label})
}

func (t *scTimeline) events() []evidence.TimelineEvent {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]evidence.TimelineEvent, 0, len(t.list)+1)
	for i, e := range t.list {
		out = append(out, evidence.TimelineEvent{Lane: e.lane, Step: i + 1, Label: e.label()})
	}
	if t.dropped > 0 {
		out = append(out, evidence.TimelineEvent{Lane: laneDatabase, Step: len(out) + 1,
			Label: fmt.Sprintf("... %d more events not shown", t.dropped)})
	}
	return out
}

// orderedIDs is the job id source of a run's stacks: each 16-byte draw
// starts with a counter (big-endian, 6 bytes) and ends random, so the
// UUIDs sort in creation order. The stacks decide at the pinned clock, so
// jobs created between two advances share created_at and the matcher
// (oldest first, then by id) would otherwise order them by random ids: an
// offer pass that ran late offered j2 before j1.
type orderedIDs struct {
	mu sync.Mutex
	n  uint64
}

func (o *orderedIDs) Read(p []byte) (int, error) {
	o.mu.Lock()
	o.n++
	n := o.n
	o.mu.Unlock()
	if _, err := rand.Read(p); err != nil {
		return 0, err
	}
	for i := 0; i < 6 && i < len(p); i++ {
		p[i] = byte(n >> (8 * (5 - i)))
	}
	return len(p), nil
}
