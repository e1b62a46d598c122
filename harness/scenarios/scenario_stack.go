package scenarios

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"net/url"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rendermac/rendermac/harness/deviceclient"
	"github.com/rendermac/rendermac/harness/evidence"
	"github.com/rendermac/rendermac/harness/targets"
	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/api"
	"github.com/rendermac/rendermac/server/clientaddr"
	"github.com/rendermac/rendermac/server/console"
	"github.com/rendermac/rendermac/server/controlplane"
	"github.com/rendermac/rendermac/server/fencing"
	"github.com/rendermac/rendermac/server/gateway"
	"github.com/rendermac/rendermac/server/grant"
	"github.com/rendermac/rendermac/server/store"
)

// scSigningKey signs every stack's grants, so an upload URL offered by one
// gateway is honoured by the API of another on the same database.
var scSigningKey = bytes.Repeat([]byte("s"), grant.MinKeyBytes)

// scStack is one control-plane process, wired by controlplane.Assemble as
// controlplane.Run wires it: its own pool, service layer, device gateway and HTTP API (which serves the
// gateway's WebSocket route and the artifact grants) on one listener, over
// the scenario's database, artifact store and pinned clock. The gateway's
// poll and sweep loops are off: the script sweeps at instants of its own.
type scStack struct {
	name    string
	pool    *pgxpool.Pool
	svc     *fencing.Service
	gw      *gateway.Gateway
	console *console.Console
	srv     *httptest.Server
	stopRun context.CancelFunc
	runDone chan struct{}
	stopped bool
}

// baseURL is where buyers and agents reach the stack.
func (s *scStack) baseURL() string { return s.srv.URL }

func (s *scStack) wsURL() string { return deviceclient.WSURL(s.srv.URL, protocol.SessionPath) }

// startStack starts stack name, replacing a stopped one of that name (a
// gateway restarted on the same database).
func (r *scRun) startStack(name string) (*scStack, error) {
	if old := r.stacks[name]; old != nil && !old.stopped {
		return nil, fmt.Errorf("gateway %s is already running", name)
	}
	ctx := r.ctx
	poolURL := r.dbURL
	if r.proxy != nil {
		poolURL = withHost(r.dbURL, r.proxy.Addr())
	}
	cfg, err := store.PoolConfig(poolURL)
	if err != nil {
		return nil, fmt.Errorf("gateway %s: %w", name, err)
	}
	if r.env.opts.HarnessVariant == VariantNoPoolRecheck {
		cfg.ShouldPing = nil // pgxpool's default: ping only after 1s idle
	}
	pool, err := store.OpenPoolConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("gateway %s: %w", name, err)
	}
	st := &scStack{name: name, pool: pool}
	st.srv = httptest.NewUnstartedServer(nil)
	signer, err := grant.NewSigner(scSigningKey, "http://"+st.srv.Listener.Addr().String())
	if err != nil {
		pool.Close()
		return nil, err
	}
	gcfg := gateway.Config{LeaseTTL: r.leaseTTL(), PollInterval: -1, SweepInterval: -1,
		Variant: gatewayVariant(r.env.opts.HarnessVariant), Limits: r.stackLimits()}
	if r.s.noPings {
		gcfg.Heartbeat = targets.NoPingHeartbeat // no ping fires within a scenario's logical time
		// The frames' own heartbeats keep the touch window a pinging
		// gateway has (its ping interval), not one as long as no ping.
		gcfg.TouchWindow = scLeaseTTL / 3
	}
	trusted, err := clientaddr.Parse(r.s.proxies) // checked when the script was parsed
	if err != nil {
		pool.Close()
		return nil, err
	}
	cards, err := r.cardsDir()
	if err != nil {
		pool.Close()
		return nil, err
	}
	scfg := r.serviceConfig()
	as := controlplane.Assemble(controlplane.Parts{API: api.Config{TrustedProxies: trusted, Services: scfg.Services, Limits: r.stackLimits()},
		Console: console.Config{Remote: r.opsState().remote[name], CardsDir: cards, CardHTML: evidence.HTMLFromJSON, CardDiff: evidence.DiffJSON},
		Pool:    pool, Store: r.served(), Grants: r.grants(), Signer: signer, Clock: r.clock,
		IDs: protocol.RandomIDs{Jobs: r.jobIDSource, Attempts: rand.Reader, Tokens: rand.Reader}, Service: scfg,
		Log: slog.New(&scLogHandler{r: r, gateway: name}), Gateway: gcfg})
	st.svc, st.gw, st.console = as.Service, as.Gateway, as.Console
	a := as.API
	st.srv.Config.Handler = a.Handler()
	st.srv.Start()
	runCtx, stopRun := context.WithCancel(context.Background())
	st.stopRun, st.runDone = stopRun, make(chan struct{})
	if r.env.opts.HarnessVariant == VariantNoListen {
		close(st.runDone)
	} else {
		go func() {
			defer close(st.runDone)
			_ = st.gw.Run(runCtx)
		}()
		select {
		case <-st.gw.Listening():
		case <-time.After(r.timeout):
			r.stacks[name] = st
			st.stop(r, true)
			return nil, fmt.Errorf("gateway %s never started listening", name)
		}
	}
	r.stacks[name] = st
	r.gwURLs.Store(name, st.wsURL())
	r.tl.add(laneGateway, fmt.Sprintf("%s started (service, gateway, API on one listener)", name))
	return st, nil
}

// stop takes the stack down. kill cuts everything at once: sessions are
// closed, and service calls in flight (one blocked at a fault point, say)
// have their context cancelled, so nothing after the point reaches the
// database, as after a crash. Otherwise sessions drain first.
func (s *scStack) stop(r *scRun, kill bool) {
	if s.stopped {
		return
	}
	s.stopped = true
	r.gwURLs.Delete(s.name)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	if kill {
		cancel()
	}
	_ = s.gw.Shutdown(ctx)
	cancel()
	s.console.Shutdown() // its live streams would hold the server's close
	s.srv.CloseClientConnections()
	s.srv.Close()
	s.stopRun()
	<-s.runDone
	s.pool.Close()
	if kill {
		r.tl.add(laneGateway, s.name+" killed: sessions cut, in-flight service calls cancelled")
	}
}

func (r *scRun) stack(name string) (*scStack, error) {
	st := r.stacks[name]
	if st == nil || st.stopped {
		return nil, fmt.Errorf("gateway %s is not running", name)
	}
	return st, nil
}

func (r *scRun) stopStacks() {
	for _, name := range []string{"gw1", "gw2", "gw3"} {
		if st := r.stacks[name]; st != nil {
			st.stop(r, false)
		}
	}
	for _, st := range r.stacks {
		st.stop(r, false)
	}
}

// hostPort returns the host:port of a postgres URL.
func hostPort(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return u.Host
}

// withHost returns raw with its host:port replaced.
func withHost(raw, hostport string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	u.Host = hostport
	return u.String()
}
