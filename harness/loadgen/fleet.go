package loadgen

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rendermac/rendermac/harness/deviceclient"
	"github.com/rendermac/rendermac/protocol"
)

// FleetConfig is what differs between the fleet's users: how many slots,
// how patient, whether an agent reconnects, and what it does with an offer.
type FleetConfig struct {
	// BaseURL is the server's; the agents dial its protocol.SessionPath.
	BaseURL string
	// Service is the one service every agent offers; Slots each one's slots.
	Service string
	Slots   int
	// HTTP uploads the outputs.
	HTTP *http.Client
	// DialTimeout bounds a dial and its hello; ReplyTimeout each wait for
	// the gateway's answer to one frame.
	DialTimeout, ReplyTimeout time.Duration
	// Dialers is how many agents Start dials at once (without Reconnect).
	Dialers int
	// Reconnect makes each agent behave like the real one on a broken
	// session: any error of its session or of a Work cuts the session, and
	// the agent dials again (backing off while dials fail) until the fleet
	// stops, forgetting the attempts it held. Without it, Start dials every
	// agent once and an agent whose session ends stays down.
	Reconnect bool
	// Work takes one offered attempt to its end; it runs on a goroutine of
	// its own, at most Slots of them per agent at once. An error is
	// reported to OnError (and with Reconnect cuts the session).
	Work func(ctx context.Context, at *Attempt) error
	// OnError, when set, hears every error of a session or a Work while the
	// fleet runs: "agent ID: ..." or "agent ID job ID: ...".
	OnError func(error)
}

// Fleet is synthetic agents over real WebSockets, one per Device, each
// speaking SPEC section 5 through a deviceclient.Client.
type Fleet struct {
	cfg     FleetConfig
	agents  []*Agent
	stop    context.CancelFunc
	closing atomic.Bool
	loops   sync.WaitGroup
}

// NewFleet is a fleet of one agent per device, not yet connected.
func NewFleet(cfg FleetConfig, devices []Device) *Fleet {
	f := &Fleet{cfg: cfg}
	for i, d := range devices {
		f.agents = append(f.agents, &Agent{Device: d, Index: i, f: f})
	}
	return f
}

// Agents are the fleet's agents, in the order of its devices.
func (f *Fleet) Agents() []*Agent { return f.agents }

// Start connects the agents and starts serving offers until ctx ends or
// Close or Stop is called. With Reconnect every agent dials on its own
// loop and Start returns at once; without, Start dials them Dialers at a
// time, starts those that are up and returns the first dial's error.
func (f *Fleet) Start(ctx context.Context) error {
	ctx, f.stop = context.WithCancel(ctx)
	if f.cfg.Reconnect {
		for _, a := range f.agents {
			f.loops.Go(func() { a.reconnecting(ctx) })
		}
		return nil
	}
	sessions := make([]*session, len(f.agents))
	err := Parallel(f.cfg.Dialers, len(f.agents), func(i int) error {
		c, err := f.agents[i].dial(ctx)
		if err != nil {
			return err
		}
		sessions[i] = newSession(c, f.cfg.Slots)
		return nil
	})
	for i, s := range sessions {
		if s == nil {
			continue
		}
		a := f.agents[i]
		a.setSession(s)
		f.loops.Go(func() { a.serve(ctx, s) })
	}
	return err
}

// Close ends every session with a normal closure, then stops the agents
// and waits for them and their Work.
func (f *Fleet) Close() {
	f.closing.Store(true)
	var wg sync.WaitGroup
	for _, a := range f.agents {
		if s := a.session(); s != nil {
			wg.Go(s.c.Close)
		}
	}
	wg.Wait()
	f.Stop()
}

// Stop cancels the agents (each cuts its session, as a crashed agent
// would) and waits for them and their Work. Stopping twice is harmless.
func (f *Fleet) Stop() {
	if f.stop != nil {
		f.stop()
	}
	f.loops.Wait()
}

func (f *Fleet) report(err error) {
	if f.cfg.OnError != nil {
		f.cfg.OnError(err)
	}
}

// Agent is one synthetic device of a fleet.
type Agent struct {
	Device
	// Index is the agent's place in the fleet (its device's in NewFleet's).
	Index int

	f  *Fleet
	mu sync.Mutex
	s  *session // the current session; nil between sessions
}

func (a *Agent) session() *session {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.s
}

func (a *Agent) setSession(s *session) {
	a.mu.Lock()
	a.s = s
	a.mu.Unlock()
}

// Kill cuts the agent's session as a crashed agent would (no close frame);
// it reports whether there was one to cut.
func (a *Agent) Kill() bool {
	s := a.session()
	if s == nil {
		return false
	}
	s.c.Drop()
	return true
}

// dial opens a session and says hello with every slot free.
func (a *Agent) dial(ctx context.Context) (*deviceclient.Client, error) {
	cfg := a.f.cfg
	dctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
	defer cancel()
	c, resp, err := deviceclient.Dial(dctx, deviceclient.WSURL(cfg.BaseURL, protocol.SessionPath), a.Token)
	if err != nil {
		if resp != nil {
			return nil, fmt.Errorf("dial %s: HTTP %d: %w", a.ID, resp.StatusCode, err)
		}
		return nil, fmt.Errorf("dial %s: %w", a.ID, err)
	}
	if _, err := c.Hello(dctx, []string{cfg.Service}, cfg.Slots, cfg.Slots); err != nil {
		c.Drop()
		return nil, fmt.Errorf("hello %s: %w", a.ID, err)
	}
	return c, nil
}

// reconnecting serves one session after another until ctx ends or the
// fleet closes, as the real agent reconnects.
func (a *Agent) reconnecting(ctx context.Context) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil && !a.f.closing.Load() {
		c, err := a.dial(ctx)
		if err != nil {
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 2*time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
		s := newSession(c, a.f.cfg.Slots)
		a.setSession(s)
		a.serve(ctx, s)
		a.setSession(nil)
		c.Drop()
	}
}
