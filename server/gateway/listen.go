package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/rendermac/rendermac/internal/dbstat"
	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/faultpoint"
	"github.com/rendermac/rendermac/server/fencing"
	"github.com/rendermac/rendermac/server/store"
)

// listenLoop keeps one dedicated connection LISTENing on the cancel and
// jobs channels, reconnecting with capped exponential backoff. The backoff
// is real time: it waits for a real database to come back, whatever clock
// pins the decisions.
func (g *Gateway) listenLoop(ctx context.Context) {
	wait := listenBackoffMin
	for {
		err := g.listenOnce(ctx, func() { wait = listenBackoffMin })
		if ctx.Err() != nil {
			return
		}
		g.log.Warn("notification listener lost; reconnecting", "err", err, "in", wait)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		wait = min(2*wait, listenBackoffMax)
	}
}

// listenOnce subscribes and dispatches notifications until the connection
// fails. Postgres does not queue notifications for a listener that was not
// subscribed, so after every (re)subscribe it reconciles: cancels that may
// have been missed are looked up in the rows, and every session looks for
// work.
func (g *Gateway) listenOnce(ctx context.Context, connected func()) error {
	conn, release, err := g.listenConn(ctx)
	if err != nil {
		return fmt.Errorf("connect listener: %w", err)
	}
	defer release()
	for _, ch := range []string{fencing.CancelChannel, JobsChannel, fencing.LostChannel, fencing.DrainChannel} {
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
			return fmt.Errorf("listen %s: %w", ch, err)
		}
	}
	connected()
	if err := g.reconcileCancels(ctx); err != nil {
		return err
	}
	// From here on every job announcement reaches this gateway, until the
	// connection fails and listenOnce returns.
	g.queues.trust(true)
	defer g.queues.trust(false)
	g.wakeService("")
	g.log.Info("listening for notifications", "subscription", g.subscriptions.Add(1))
	g.listeningOnce.Do(func() { close(g.listening) })
	for {
		n, err := store.AwaitNotification(ctx, conn)
		if err != nil {
			return fmt.Errorf("wait for notification: %w", err)
		}
		g.dispatchNotification(ctx, n)
	}
}

func (g *Gateway) dispatchNotification(ctx context.Context, n *pgconn.Notification) {
	if hook := g.beforeNotice.Load(); hook != nil {
		(*hook)(n.Channel)
	}
	switch n.Channel {
	case fencing.CancelChannel:
		g.onCancelNotice(ctx, n.Payload)
	case fencing.LostChannel:
		g.onLostNotice(n.Payload)
	case fencing.DrainChannel:
		if protocol.ValidID(n.Payload) {
			g.sendDrain(n.Payload)
		}
	case JobsChannel:
		if g.ignoreJobs.Load() {
			break
		}
		if n.Payload == "" {
			g.wakeService("")
		} else {
			g.wakeForJob(n.Payload)
		}
	}
}

// onCancelNotice routes one cancel to the device's sessions here, if any;
// the gateway holding the device's session is whichever one finds it.
func (g *Gateway) onCancelNotice(ctx context.Context, payload string) {
	var n fencing.CancelNotice
	if err := json.Unmarshal([]byte(payload), &n); err != nil || !protocol.ValidID(n.JobID) {
		g.log.Warn("ignoring malformed cancel notice", "err", err)
		return
	}
	if n.DeviceID == "" || n.AttemptID == "" {
		// A notice naming only the job: its live attempt says where to go.
		err := g.pool.QueryRow(dbstat.WithOp(ctx, OpLostLookup), sqlLiveAttemptDevice, n.JobID).Scan(&n.AttemptID, &n.DeviceID)
		if errors.Is(err, pgx.ErrNoRows) {
			return
		}
		if err != nil {
			g.log.Warn("find device of cancelled job", "job_id", n.JobID, "err", err)
			return
		}
	}
	g.sendCancel(n)
}

// onLostNotice tells the device's sessions here that the sweeper ended one
// of its attempts, and frees the slot that attempt held in their count. The
// frame is written by a goroutine of the session, but counted pending here,
// in the listener, before any later notice (the requeue's jobs notice
// among them) can wake an offer: every offer written after this waits for
// the frame (waitLostFrames), so a device reading in order has stopped the
// attempt before the offer for the freed slot arrives, even when the
// session's slot count was free already (a restarted agent reports its
// slots free while the database still holds its old attempts live).
func (g *Gateway) onLostNotice(payload string) {
	var n fencing.CancelNotice
	if err := json.Unmarshal([]byte(payload), &n); err != nil || !protocol.ValidID(n.JobID) ||
		!protocol.ValidID(n.AttemptID) || !protocol.ValidID(n.DeviceID) {
		g.log.Warn("ignoring malformed lost notice", "err", err)
		return
	}
	for _, s := range g.sessionsOf(n.DeviceID) {
		s.mu.Lock()
		if s.spawnLocked(func() { s.writeLost(n) }) {
			s.lostPending++
		}
		s.mu.Unlock()
	}
}

// writeLost writes one attempt_lost frame onLostNotice counted pending,
// then frees the slot the attempt held.
func (s *session) writeLost(n fencing.CancelNotice) {
	if hook := s.g.beforeLostFrame.Load(); hook != nil {
		(*hook)()
	}
	s.g.svc.FaultPoints().Hit(s.g.ctx, faultpoint.GatewayBeforeLostFrame)
	s.g.wakes.notices.Add(1)
	if s.write(&protocol.LeaseConflict{Type: protocol.TypeLeaseConflict, JobID: n.JobID, AttemptID: n.AttemptID,
		Reason: protocol.ReasonAttemptLost}) {
		s.log.Info("lost attempt announced", "job_id", n.JobID, "attempt_id", n.AttemptID)
	}
	s.mu.Lock()
	s.lostPending--
	s.lostDone.Broadcast()
	s.mu.Unlock()
	s.freeSlot()
}

// waitLostFrames returns once every attempt_lost frame counted pending so
// far has been written (or its write has failed).
func (s *session) waitLostFrames() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.lostPending > 0 {
		s.lostDone.Wait()
	}
}

// listenConn returns the listener's dedicated connection and what ends its
// use: Config.ListenConn's, else a new connection on the pool's settings,
// closed when the subscription ends.
func (g *Gateway) listenConn(ctx context.Context) (*pgx.Conn, func(), error) {
	if g.cfg.ListenConn != nil {
		return g.cfg.ListenConn(ctx)
	}
	conn, err := pgx.ConnectConfig(ctx, g.pool.Config().ConnConfig.Copy())
	if err != nil {
		return nil, nil, err
	}
	return conn, func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}, nil
}

// reconcileCancels sends cancel for every live attempt of a cancelling job
// on a device connected here. Agents ignore a cancel for an attempt they
// no longer hold or have already answered, so a repeat is harmless.
func (g *Gateway) reconcileCancels(ctx context.Context) error {
	_, ids := g.welcomed()
	notices, err := g.pendingCancels(ctx, ids)
	if err != nil {
		return err
	}
	for _, n := range notices {
		g.sendCancel(n)
	}
	drains, err := g.pendingDrains(ctx, ids)
	if err != nil {
		return err
	}
	for _, id := range drains {
		g.sendDrain(id)
	}
	return nil
}
