package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rendermac/rendermac/internal/clock"
	"github.com/rendermac/rendermac/internal/dbstat"
	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/fencing"
	"github.com/rendermac/rendermac/server/grant"
	"github.com/rendermac/rendermac/server/metrics"
	"github.com/rendermac/rendermac/server/ratelimit"
)

// Gateway is the device WebSocket endpoint: it authenticates devices, runs
// one session per connection, offers leases into free slots, routes
// progress, commit and fail through the service layer with the session's
// authenticated device, and fans cancel notices out to the devices it
// holds. Several Gateways (processes) may share one database.
type Gateway struct {
	svc    *fencing.Service
	pool   *pgxpool.Pool
	signer *grant.Signer
	m      *metrics.Metrics
	log    *slog.Logger
	cfg    Config

	// ctx is what service calls run under: a dropped connection must not
	// abort a transaction half-way, only a forced stop may.
	ctx  context.Context
	stop context.CancelFunc

	listening     chan struct{}
	listeningOnce sync.Once
	// subscriptions counts successful (re)subscribes of the listener.
	subscriptions atomic.Int64
	// offeredOn maps attempt id to the session it was offered on; it is
	// kept only by a broken variant (-tags mutations).
	offeredOn sync.Map
	// v holds the broken variant's hooks, constant false in the default
	// build (see variant_off.go).
	v variant
	// ignoreJobs drops JobsChannel notifications, so tests can show that
	// the polling fallback alone finds queued work.
	ignoreJobs atomic.Bool
	// beforeLostFrame, when set (by tests), runs in a session's goroutine
	// before it writes an attempt_lost frame.
	beforeLostFrame atomic.Pointer[func()]
	// beforeNotice, when set (by tests), runs in the listener before it
	// handles a notification, with the notification's channel.
	beforeNotice atomic.Pointer[func(channel string)]
	// wakeNext rotates where wakeForJob starts looking for a free slot.
	wakeNext atomic.Uint64
	// connectsPerIP and connectsPerDevice are Config.Limits' buckets.
	connectsPerIP, connectsPerDevice *ratelimit.Keyed
	// wakes counts what woke sessions (Wakeups).
	wakes wakeCounters
	// queues remembers services found without a leasable job, so that a
	// freed slot runs no Lease that can only answer no_job (queues.go).
	queues emptyQueues

	mu       sync.Mutex
	draining bool
	all      map[*session]struct{}
	byDevice map[string]map[*session]struct{} // welcomed sessions
	handlers sync.WaitGroup
}

// New returns a Gateway over the service layer svc and its pool, signing
// artifact grants with signer and counting into m. Serve Handler, run Run
// for the background loops, and call Shutdown to drain.
func New(svc *fencing.Service, pool *pgxpool.Pool, signer *grant.Signer, m *metrics.Metrics, log *slog.Logger, cfg Config) *Gateway {
	cfg = cfg.withDefaults()
	if cfg.Grants == nil {
		cfg.Grants = signer
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, stop := context.WithCancel(context.Background())
	return &Gateway{svc: svc, pool: pool, signer: signer, m: m, log: log.With("component", "gateway"), cfg: cfg, v: newVariant(cfg.Variant),
		ctx: ctx, stop: stop, listening: make(chan struct{}),
		connectsPerIP: cfg.Limits.Keyed(cfg.Limits.ConnectsPerIP), connectsPerDevice: cfg.Limits.Keyed(cfg.Limits.ConnectsPerDevice),
		all: map[*session]struct{}{}, byDevice: map[string]map[*session]struct{}{}}
}

// now is the instant service calls decide at: the pinned clock's, else
// zero (the database clock).
func (g *Gateway) now() time.Time { return clock.PinnedNow(g.cfg.Clock) }

// Listening returns a channel that is closed once Run's listener has
// subscribed to the notification channels for the first time and has
// reconciled what it might have missed; from then on a committed cancel
// reaches this gateway's devices.
func (g *Gateway) Listening() <-chan struct{} { return g.listening }

// Handler serves GET protocol.SessionPath. It authenticates the device before upgrading:
// a missing, unknown or revoked token is 401 with a JSON error and no
// WebSocket; a draining gateway answers 503; past ConnectsPerIP (counted
// before the token is looked up) or ConnectsPerDevice (after) it is 429
// rate_limited with Retry-After, and no WebSocket.
func (g *Gateway) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+protocol.SessionPath, g.serveWS)
	return mux
}

func (g *Gateway) serveWS(w http.ResponseWriter, r *http.Request) {
	if ok, wait := g.connectsPerIP.Allow(ratelimit.IPKey(r.RemoteAddr)); !ok {
		g.m.RateLimited.WithLabelValues("connects_per_ip").Inc()
		ratelimit.Refuse(w, "device connections from this address", wait)
		return
	}
	deviceID, err := g.authenticate(r.Context(), r.Header.Get("Authorization"))
	switch {
	case errors.Is(err, errUnauthorized):
		w.Header().Set("WWW-Authenticate", `Bearer realm="rendermac-device"`)
		writeJSONError(w, http.StatusUnauthorized, "unauthorized", "missing, unknown or revoked device token")
		return
	case err != nil:
		g.log.Error("authenticate device", "err", err)
		writeJSONError(w, http.StatusServiceUnavailable, "unavailable", "cannot check the device token now")
		return
	}
	if ok, wait := g.connectsPerDevice.Allow(deviceID); !ok {
		g.m.RateLimited.WithLabelValues("connects_per_device").Inc()
		g.log.Warn("device connecting too often", "device_id", deviceID, "retry_after", wait)
		ratelimit.Refuse(w, "connections of this device", wait)
		return
	}
	if !g.admit() {
		writeJSONError(w, http.StatusServiceUnavailable, "unavailable", "gateway is shutting down")
		return
	}
	conn, err := websocket.Accept(w, r, nil)
	if err != nil {
		g.handlers.Done()
		g.log.Info("websocket upgrade failed", "device_id", deviceID, "err", err)
		return
	}
	s := newSession(g, conn, deviceID)
	if !g.track(s) {
		g.handlers.Done()
		_ = conn.Close(websocket.StatusGoingAway, "gateway shutting down")
		return
	}
	// The session runs in a goroutine of its own and this handler returns:
	// the connection is hijacked, and net/http's goroutine would keep the
	// request, its response buffers and a stack grown by the handshake for
	// as long as the session lasts.
	go func() {
		defer g.handlers.Done()
		defer g.untrack(s)
		s.serve()
	}()
}

var errUnauthorized = errors.New("unauthorized")

// authenticate maps "Bearer <device token>" to a device id. The token is
// hashed before it goes anywhere, and never logged.
func (g *Gateway) authenticate(ctx context.Context, header string) (string, error) {
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return "", errUnauthorized
	}
	var id string
	err := g.pool.QueryRow(dbstat.WithOp(ctx, OpAuth), sqlAuthDevice, protocol.HashCommitToken(token)).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", errUnauthorized
	}
	if err != nil {
		return "", fmt.Errorf("look up device token: %w", err)
	}
	return id, nil
}

func writeJSONError(w http.ResponseWriter, status int, code, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"code": code, "message": message})
}

// admit counts a new handler unless the gateway is draining; the count is
// taken under the lock Shutdown sets draining under, so Shutdown's Wait
// never races an Add.
func (g *Gateway) admit() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.draining {
		return false
	}
	g.handlers.Add(1)
	return true
}

// track adds an upgraded session to the set Shutdown drains. It refuses
// when Shutdown began after admit: that session was not in Shutdown's list.
func (g *Gateway) track(s *session) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.draining {
		return false
	}
	g.all[s] = struct{}{}
	g.m.Sessions.Inc()
	return true
}

func (g *Gateway) untrack(s *session) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.all, s)
	g.unregisterLocked(s)
	g.m.Sessions.Dec()
}

// register makes a welcomed session reachable for its device's cancels and
// returns the device's older sessions: a new hello means the agent came
// back, so those are stale (half-open, or about to notice) and an offer
// sent there would be lost until its lease expired.
func (g *Gateway) register(s *session) []*session {
	g.mu.Lock()
	defer g.mu.Unlock()
	set := g.byDevice[s.deviceID]
	if set == nil {
		set = map[*session]struct{}{}
		g.byDevice[s.deviceID] = set
	}
	var stale []*session
	for old := range set {
		stale = append(stale, old)
		delete(set, old)
	}
	set[s] = struct{}{}
	return stale
}

func (g *Gateway) unregisterLocked(s *session) {
	if set := g.byDevice[s.deviceID]; set != nil {
		delete(set, s)
		if len(set) == 0 {
			delete(g.byDevice, s.deviceID)
		}
	}
}

// sessionsOf returns the welcomed sessions of a device on this gateway.
func (g *Gateway) sessionsOf(deviceID string) []*session {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]*session, 0, len(g.byDevice[deviceID]))
	for s := range g.byDevice[deviceID] {
		out = append(out, s)
	}
	return out
}

// welcomed returns every welcomed session and its device ids.
func (g *Gateway) welcomed() ([]*session, []string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []*session
	ids := make([]string, 0, len(g.byDevice))
	for id, set := range g.byDevice {
		ids = append(ids, id)
		for s := range set {
			out = append(out, s)
		}
	}
	return out, ids
}

// Shutdown drains the gateway: it refuses new sessions, stops offering
// leases, lets every frame already being handled finish and its reply be
// written, and then closes each session with 1001 (going away); agents
// reconnect elsewhere and re-send anything unanswered. If ctx ends first,
// the remaining sessions are cut and their service calls cancelled.
// http.Server.Shutdown does not wait for upgraded connections, so call
// this as well.
func (g *Gateway) Shutdown(ctx context.Context) error {
	g.mu.Lock()
	g.draining = true
	sessions := make([]*session, 0, len(g.all))
	for s := range g.all {
		sessions = append(sessions, s)
	}
	g.mu.Unlock()
	var drains sync.WaitGroup
	for _, s := range sessions {
		drains.Go(func() { s.drain(websocket.StatusGoingAway, "gateway shutting down") })
	}
	done := make(chan struct{})
	go func() {
		drains.Wait()
		g.handlers.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		g.stop()
		<-done
		return fmt.Errorf("gateway shutdown: %w", ctx.Err())
	}
}
