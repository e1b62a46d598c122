package gateway

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/rendermac/rendermac/internal/dbstat"
	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/fencing"
	"github.com/rendermac/rendermac/server/store"
)

// describeDevice records what hello says the device offers: its services
// and its slots_total, which Lease counts live attempts against, so the
// control plane never offers more than the agent can hold. It also
// heartbeats the device. ok is false when the device was revoked (or
// deleted) since the handshake.
//
// It is one transaction in one round trip: BEGIN, the device's lock, the
// update (which counts the live attempts in its own snapshot, taken after
// the lock is held: READ COMMITTED gives every statement a new one), and
// COMMIT, pipelined. A statement that fails skips the rest, COMMIT too.
func (g *Gateway) describeDevice(ctx context.Context, deviceID string, h *protocol.Hello) (ok, drain bool, err error) {
	b := &pgx.Batch{}
	// Queued as text, not with b.BeginTx: a pool batch that begins a
	// transaction that way keeps its connection until a Tx commits it, and
	// this batch commits itself.
	b.Queue("begin isolation level read committed")
	b.Queue(sqlLockDeviceForHello, deviceID)
	b.Queue(sqlDescribeDevice, deviceID, uniq(h.Services), h.SlotsTotal, store.NowArg(g.now())).QueryRow(func(r pgx.Row) error {
		err := r.Scan(&drain)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		ok = err == nil
		return err
	})
	store.QueueCommit(b)
	if err := g.pool.SendBatch(dbstat.WithOp(ctx, OpHello), b).Close(); err != nil {
		return false, false, fmt.Errorf("describe device %s: %w", deviceID, err)
	}
	return ok, drain, nil
}

// pendingDrains lists the given devices with a drain not yet delivered.
func (g *Gateway) pendingDrains(ctx context.Context, deviceIDs []string) ([]string, error) {
	if len(deviceIDs) == 0 {
		return nil, nil
	}
	rows, err := g.pool.Query(dbstat.WithOp(ctx, OpDrain), sqlPendingDrains, deviceIDs)
	if err != nil {
		return nil, fmt.Errorf("pending drains: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("pending drains: %w", err)
	}
	return ids, nil
}

// sendDrain tells every session of the device on this gateway to drain.
func (g *Gateway) sendDrain(deviceID string) {
	for _, s := range g.sessionsOf(deviceID) {
		s.spawn(s.drainDevice)
	}
}

// drainDevice closes the session to offers, then writes the drain frame
// and, once it is written, clears the device's drain request: a drain is
// delivered once, and an agent restarted afterwards takes work again. A
// frame that could not be written leaves the request for the next hello.
func (s *session) drainDevice() {
	s.mu.Lock()
	s.deviceDrained = true
	s.mu.Unlock()
	if !s.write(&protocol.Drain{Type: protocol.TypeDrain}) {
		return
	}
	s.log.Info("drain sent: an operator drained this device")
	if _, err := s.g.pool.Exec(dbstat.WithOp(s.g.ctx, OpDrain), sqlDrainDelivered, s.deviceID); err != nil {
		s.log.Warn("clear delivered drain; it is sent again at the next hello", "err", err)
	}
}

// pendingCancels lists the live attempts on the given devices whose job is
// cancelling.
func (g *Gateway) pendingCancels(ctx context.Context, deviceIDs []string) ([]fencing.CancelNotice, error) {
	if len(deviceIDs) == 0 {
		return nil, nil
	}
	rows, err := g.pool.Query(dbstat.WithOp(ctx, OpPendingCancels), sqlPendingCancels, deviceIDs)
	if err != nil {
		return nil, fmt.Errorf("pending cancels: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (fencing.CancelNotice, error) {
		var n fencing.CancelNotice
		return n, r.Scan(&n.JobID, &n.AttemptID, &n.DeviceID)
	})
	if err != nil {
		return nil, fmt.Errorf("pending cancels: %w", err)
	}
	return out, nil
}

// sendCancel tells every session of the notice's device on this gateway to
// stop the attempt. Writes run in the sessions' goroutines, so one slow
// socket never holds up the listener.
func (g *Gateway) sendCancel(n fencing.CancelNotice) {
	for _, s := range g.sessionsOf(n.DeviceID) {
		s.spawn(func() {
			s.g.wakes.notices.Add(1)
			if s.write(&protocol.Cancel{Type: protocol.TypeCancel, JobID: n.JobID, AttemptID: n.AttemptID}) {
				s.log.Info("cancel sent", "job_id", n.JobID, "attempt_id", n.AttemptID)
			}
		})
	}
}

// wakeService wakes the offerers of the sessions that offer service ("" is
// any service). A woken session without a free slot does nothing.
func (g *Gateway) wakeService(service string) {
	g.queues.changed()
	sessions, _ := g.welcomed()
	for _, s := range sessions {
		s.mu.Lock()
		if service == "" || slices.Contains(s.services, service) {
			s.wakeOfferLocked()
		}
		s.mu.Unlock()
	}
}

// wakeForJob handles one jobs notice naming a service: one job became
// leasable, so one session with a free slot not yet promised to an earlier
// notice is enough to lease it, instead of every idle session racing for
// it in its own Lease transaction (a wake storm that grows with the idle
// sessions). Only when no session has such a slot, which includes a
// session whose Lease is in flight and may have missed the job, are all
// the service's sessions woken as before. A woken session that cannot
// lease for its promises (no slot, draining, revoked, an error, gone)
// passes them on by waking every session (offerLoop).
func (g *Gateway) wakeForJob(service string) {
	g.queues.changed()
	sessions, _ := g.welcomed()
	// In device order, not the map's: consecutive notices then start at
	// consecutive sessions, a rotation rather than a fresh random pick.
	slices.SortFunc(sessions, func(a, b *session) int { return strings.Compare(a.deviceID, b.deviceID) })
	if n := len(sessions); n > 0 {
		start := int(g.wakeNext.Add(1) % uint64(n))
		for i := range n {
			if s := sessions[(start+i)%n]; s.promise(service) {
				s.wakeOffer()
				return
			}
		}
	}
	g.wakeService(service)
}

// jobsAvailable wakes this gateway's sessions for a requeued job at once;
// the service layer's NOTIFY tells every other gateway.
func (g *Gateway) jobsAvailable(service string) {
	g.wakeService(service)
}
