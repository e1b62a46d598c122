package agent

import (
	"context"
	"errors"
	"time"

	"github.com/rendermac/rendermac/protocol"
)

// errNoPong is why a ping failed when the gateway did not answer in time.
var errNoPong = errors.New("no pong within the ping timeout")

// pingTimings are the ping interval and timeout on a session: the
// configured ones, each capped at a third of the lease TTL, so that a dead
// connection is found (interval + timeout <= 2/3 TTL) while the leases it
// carries can still be renewed on a new one.
func pingTimings(cfg Config, w protocol.Welcome) (interval, timeout time.Duration) {
	third := max(time.Duration(w.LeaseTTLMs)*time.Millisecond/3, minHeartbeat)
	return min(cfg.PingInterval, third), min(cfg.PingTimeout, third)
}

// DeadConnectionBound is the longest a connection that carries nothing any
// more (a half-open TCP path: no RST, no FIN) goes unnoticed on a session
// whose welcome states leaseTTL: one ping interval, then one ping timeout.
// The agent then drops the connection and reconnects with backoff.
func DeadConnectionBound(cfg Config, leaseTTL time.Duration) time.Duration {
	cfg.PingInterval = orDefault(cfg.PingInterval, DefaultPingInterval)
	cfg.PingTimeout = orDefault(cfg.PingTimeout, DefaultPingTimeout)
	i, t := pingTimings(cfg, protocol.Welcome{LeaseTTLMs: leaseTTL.Milliseconds()})
	return i + t
}

// pingLoop is the agent's own read deadline. The gateway pings too, but a
// gateway ping that cannot reach a half-open connection tells the agent
// nothing: without its own check the agent would keep rendering on a
// connection that no frame crosses any more, its leases expiring unseen.
// Every interval it sends a ping; a pong must come back within the timeout
// (coder/websocket reads it in readLoop), else the connection is closed,
// which ends readLoop and so the session, and connectLoop reconnects.
// Both waits are real time, not the Clock, as ShutdownTimeout is: they
// measure a network path, which a test's stub clock does not drive.
func (a *Agent) pingLoop(ctx context.Context, s *session) {
	if a.v.noReadDeadline() {
		return
	}
	interval, timeout := pingTimings(a.cfg, s.welcome)
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(interval):
		}
		if err := a.ping(ctx, s, timeout); err != nil {
			if ctx.Err() != nil {
				return
			}
			a.log.Warn("gateway connection presumed dead; dropping it", "err", err, "ping_timeout", timeout)
			s.conn.CloseNow()
			return
		}
	}
}

// ping sends one ping and waits at most timeout for its pong.
func (a *Agent) ping(ctx context.Context, s *session, timeout time.Duration) error {
	pctx, cancel := context.WithTimeoutCause(ctx, timeout, errNoPong)
	defer cancel()
	if err := s.conn.Ping(pctx); err != nil {
		if errors.Is(context.Cause(pctx), errNoPong) {
			return errNoPong
		}
		return err
	}
	return nil
}
