package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/rendermac/rendermac/protocol"
)

// sessionHealthy is how long a session must last after its welcome before
// the backoff resets: a gateway that accepts and then drops every
// connection at once must not be hammered at the base delay forever. Ten
// seconds, not a minute: with a minute, a fleet whose sessions end every
// half minute or so (a gateway restart, a Postgres failover, a store outage
// closing sessions 1011) stayed at the 30 s ceiling and its Macs sat idle
// for half of each minute (`rendermac fleet`, 8 agents, a fault every ~7 s:
// 289 jobs still queued after the drain).
const sessionHealthy = 10 * time.Second

// Agent is one device's worker. Create it with New and call Run once.
type Agent struct {
	cfg   Config
	v     variant
	log   *slog.Logger
	base  *url.URL
	wsURL string
	// wsURLs are the session URLs of ServerURL and every FailoverURLs, in
	// order; urlIdx is the one the next dial uses (connectLoop's only).
	wsURLs []string
	urlIdx int

	mu       sync.Mutex
	attempts map[string]*attempt // by attempt id; the slots in use
	sess     *session            // current connection, nil while disconnected
	// slotsSent is the free-slot count the gateway last heard on sess.
	slotsSent int
	draining  bool // shutting down: report no free slots, refuse offers
	hardStop  bool // Run's context ended: running attempts are being failed
	stopping  bool // drained: close the session and do not reconnect
	// drained is closed once a drain (Drain, or shutdown) finds no
	// attempt left; Run then returns without failing anything.
	drained     chan struct{}
	drainedDone bool
	ran         bool
	jobsCtx     context.Context // parent of every attempt's context
	// lowDisk says the work dir had less than MinFreeBytes free at the
	// last look: the agent reports no free slot and refuses offers.
	lowDisk bool
	// keptToken is what the reuse_commit_token variant keeps; always "" in
	// an agent as specified.
	keptToken string

	wake    chan struct{} // something is due on the wire
	removed chan struct{} // an attempt ended (for the shutdown drain)
	jobs    sync.WaitGroup
}

// New validates cfg and returns an agent. Its only I/O is reading
// Transport.CAFile.
func New(cfg Config) (*Agent, error) {
	cfg, base, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	wsURLs := []string{sessionURL(base)}
	for _, f := range cfg.FailoverURLs {
		u, err := parseServerURL(f)
		if err != nil {
			return nil, fmt.Errorf("agent config: failover %w", err)
		}
		if err := cfg.Transport.CheckURL("--failover", u); err != nil {
			return nil, err
		}
		wsURLs = append(wsURLs, sessionURL(u))
	}
	return &Agent{
		cfg: cfg, v: newVariant(cfg.Variant), log: cfg.Logger, base: base, wsURL: sessionURL(base), wsURLs: wsURLs,
		attempts: make(map[string]*attempt),
		wake:     make(chan struct{}, 1),
		removed:  make(chan struct{}, 1),
		drained:  make(chan struct{}),
	}, nil
}

// fatalError ends Run: retrying cannot help (the device token was refused).
type fatalError struct{ err error }

func (e *fatalError) Error() string { return e.err.Error() }
func (e *fatalError) Unwrap() error { return e.err }

// Run connects, serves lease offers and reconnects until ctx ends or a
// Drain has let every attempt end (then it returns nil having failed
// nothing). When ctx ends it shuts down: it reports no free slots, fails every running attempt with
// provider_offline, waits up to ShutdownTimeout for the results, closes the
// session with status 1000 and returns nil once every goroutine it started
// has ended. It returns an error only when it cannot work at all: the work
// dir is unusable or the gateway refused the device token.
func (a *Agent) Run(ctx context.Context) error {
	a.mu.Lock()
	if a.ran {
		a.mu.Unlock()
		return errors.New("agent: Run called twice")
	}
	a.ran = true
	// Attempts and the connection outlive ctx on purpose: shutdown still
	// has fail frames to send after the caller's context is done.
	jobsCtx, stopJobs := context.WithCancelCause(context.WithoutCancel(ctx))
	a.jobsCtx = jobsCtx
	a.mu.Unlock()
	defer stopJobs(errShutdown)
	if err := os.MkdirAll(a.cfg.WorkDir, 0o700); err != nil {
		return fmt.Errorf("agent: work dir: %w", err)
	}
	a.removeStaleAttempts()
	a.mu.Lock()
	a.checkDiskLocked()
	a.mu.Unlock()
	connCtx, stopConn := context.WithCancel(context.WithoutCancel(ctx))
	defer stopConn()
	loopDone := make(chan error, 1)
	go func() { loopDone <- a.connectLoop(connCtx) }()

	var err error
	select {
	case <-ctx.Done():
		a.log.Info("shutting down")
		a.drain(stopJobs)
		a.closeSession()
		stopConn()
		<-loopDone
	case <-a.drained:
		a.log.Info("drained: every attempt ended; stopping")
		a.closeSession()
		stopConn()
		<-loopDone
	case err = <-loopDone:
		stopJobs(errShutdown)
	}
	a.jobs.Wait()
	a.forgetAll()
	return err
}

// connectLoop runs sessions back to back, backing off between them.
func (a *Agent) connectLoop(ctx context.Context) error {
	bo := backoff{base: a.cfg.BackoffBase, max: a.cfg.BackoffMax, rnd: a.cfg.Rand}
	for {
		lasted, err := a.runSession(ctx)
		if a.isStopping() || ctx.Err() != nil {
			return nil
		}
		var fe *fatalError
		if errors.As(err, &fe) {
			a.log.Error("gateway refused this device; not reconnecting", "err", err)
			return fe.err
		}
		if lasted > sessionHealthy {
			bo.reset()
		}
		a.urlIdx = (a.urlIdx + 1) % len(a.wsURLs)
		d := reconnectDelay(bo.next(), err)
		// A refused certificate is said in one line of its own (host, what
		// failed, the flag that fixes it), then backed off like any failure.
		if ce, ok := errors.AsType[*CertError](err); ok {
			a.log.Error(ce.Error(), "retry_in", d)
		} else {
			a.log.Warn("gateway session ended; reconnecting", "err", err, "lasted", lasted, "retry_in", d,
				"next_url", a.wsURLs[a.urlIdx])
		}
		select {
		case <-ctx.Done():
			return nil
		case <-a.cfg.Clock.After(d):
		}
	}
}

// maxRetryAfter caps how long a gateway's Retry-After can park the agent.
const maxRetryAfter = 10 * time.Minute

// reconnectDelay is the backoff's next delay, or the Retry-After of the
// gateway's refusal (a 429 rate_limited) when that is longer, so that a
// rate-limited agent does not come back before its bucket has refilled.
func reconnectDelay(next time.Duration, err error) time.Duration {
	var ae *APIError
	if errors.As(err, &ae) && ae.RetryAfter > next {
		return min(ae.RetryAfter, maxRetryAfter)
	}
	return next
}

// drain stops every attempt with the shutdown cause (so each pipeline sends
// fail provider_offline) and waits, bounded by ShutdownTimeout, until the
// gateway answered them all. The bound is real time, not the Clock: it
// limits how long a process exit may take, which is about the OS, not about
// lease time.
func (a *Agent) drain(stopJobs context.CancelCauseFunc) {
	a.mu.Lock()
	a.draining = true
	a.hardStop = true
	a.mu.Unlock()
	stopJobs(errShutdown)
	signal(a.wake)
	timer := time.NewTimer(a.cfg.ShutdownTimeout)
	defer timer.Stop()
	for {
		a.mu.Lock()
		n := len(a.attempts)
		a.mu.Unlock()
		if n == 0 {
			return
		}
		select {
		case <-a.removed:
		case <-timer.C:
			a.log.Warn("shutdown timeout: attempts left unresolved; the control plane's sweeper will expire them",
				"attempts", n)
			return
		}
	}
}

// Drain stops taking work and lets running attempts finish: from now on
// the gateway hears no free slot (hello and slots), an offer that still
// arrives is refused with fail no_capacity, and Run returns once the
// last attempt has ended (its commit or fail answered), closing the
// session normally. Ending Run's context meanwhile still fails what runs
// as provider_offline. Drain may be called from any goroutine, more than
// once.
func (a *Agent) Drain() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.draining {
		a.log.Info("draining: taking no more offers; running attempts finish", "attempts", len(a.attempts))
	}
	a.draining = true
	a.checkDrainedLocked()
	signal(a.wake) // a session reports no free slot
}

// checkDrainedLocked closes drained once a drain has no attempt left.
func (a *Agent) checkDrainedLocked() {
	if a.draining && len(a.attempts) == 0 && !a.drainedDone {
		a.drainedDone = true
		close(a.drained)
	}
}

// closeSession ends the current connection with a normal closure and keeps
// connectLoop from opening another.
func (a *Agent) closeSession() {
	a.mu.Lock()
	a.stopping = true
	s := a.sess
	a.mu.Unlock()
	if s == nil {
		return
	}
	if err := s.conn.Close(websocket.StatusNormalClosure, "agent shutting down"); err != nil {
		a.log.Debug("close session", "err", err)
	}
}

func (a *Agent) isStopping() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.stopping
}

// forgetAll drops every attempt left after shutdown, and its token with it.
func (a *Agent) forgetAll() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for id, at := range a.attempts {
		at.forget(errShutdown)
		delete(a.attempts, id)
	}
}

// signal sets a level-triggered flag channel without blocking.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// hello is the frame that opens a session, with the free slots it reports.
func (a *Agent) hello() (*protocol.Hello, int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	free := a.slotsFreeLocked()
	return &protocol.Hello{Type: protocol.TypeHello, AgentVersion: a.cfg.AgentVersion, Services: a.cfg.Services,
		SlotsTotal: a.cfg.Slots, SlotsFree: free}, free
}

// slotsFreeLocked counts free slots. An offer refused for lack of capacity
// still occupies an entry until its fail is answered, so clamp at zero.
func (a *Agent) slotsFreeLocked() int {
	if a.draining || a.lowDisk {
		return 0
	}
	return max(0, a.cfg.Slots-len(a.attempts))
}
