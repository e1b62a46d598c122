package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/rendermac/rendermac/internal/clock"
	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/store"
)

// session is one device connection. Its one long-lived goroutine is the
// reader, which decodes frames and handles hello, slots and progress itself
// (short transactions); commit and fail run in workers so that a long
// verification does not hold up the heartbeats of the device's other
// attempts, and frames about one attempt are handled in arrival order
// (runOrdered). An offer pass leases into free slots in a goroutine started
// when the session is woken with something to lease into, which ends when
// there is nothing left (wakeOffer). The heartbeat is a timer, not a
// goroutine: it pings from the timer's own goroutine and re-arms. So an
// idle session is its reader parked on the socket and one pending timer.
// Every write goes straight to the connection (coder/websocket serialises
// concurrent writers), so a worker's result is on the wire before it frees
// the slot the next offer pass fills.
type session struct {
	g        *Gateway
	conn     *websocket.Conn
	deviceID string
	log      *slog.Logger
	// ctx bounds reads and writes; cancelling it closes the connection.
	ctx    context.Context
	cancel context.CancelFunc
	// workers is the semaphore of frame workers.
	workers chan struct{}
	bad     int // bad_message frames so far; reader only

	mu         sync.Mutex
	welcomed   bool
	services   []string
	slotsTotal int
	// slotsFree is the gateway's view of the device's free slots: the last
	// report, minus offers since, plus attempts ended by a result sent.
	// It only gates when to ask; Lease's own count of live attempts
	// against slots_total is the bound. It is below zero while a report
	// of no free slot meets a claim still in flight (reportSlots).
	slotsFree int
	// offering counts offers claimed but not yet written, which a slots
	// report sent meanwhile cannot have counted; the claim ends just
	// before the write (deliver).
	offering int
	// promised counts jobs notices (wakeForJob) this session was woken
	// for alone and has not yet begun to lease for; it never exceeds the
	// free slots at the time of the promise.
	promised int
	// tails holds, per attempt, the done channel of its last queued frame.
	tails map[string]chan struct{}
	// unheard holds the lease replies (tokens included) of the offers
	// written on this session that no frame of it has named since: what a
	// device that closes the session normally never answered
	// (withdrawUnheard).
	unheard  map[string]protocol.Reply
	draining bool
	ended    bool
	revoked  bool // Lease said not_found: no more offers on this session
	// deviceDrained: an operator drained the device and the drain frame
	// was sent (or is being sent): no more offers on this session.
	deviceDrained bool
	// lostPending counts attempt_lost frames onLostNotice announced to
	// the session and not yet written; deliver waits for them on lostDone
	// (a condition on mu).
	lostPending int
	lostDone    *sync.Cond
	// offerRunning is set while an offer pass goroutine runs; offerAgain
	// asks it for one more pass (a wake that came meanwhile).
	offerRunning, offerAgain bool
	// pingTimer is the pending heartbeat; nil before serve arms it.
	pingTimer clock.Timer
	// lastTouch is when this session last heartbeat the device (touch.go).
	lastTouch time.Time
	// inflight counts frames being handled and offers being made: what
	// drain waits for before it closes.
	inflight sync.WaitGroup
	// bg counts every goroutine of the session except the reader: workers,
	// offer passes, heartbeats and notice writers.
	bg sync.WaitGroup
}

func newSession(g *Gateway, conn *websocket.Conn, deviceID string) *session {
	ctx, cancel := context.WithCancel(g.ctx)
	s := &session{g: g, conn: conn, deviceID: deviceID, log: g.log.With("device_id", deviceID),
		ctx: ctx, cancel: cancel, workers: make(chan struct{}, maxWorkersPerSession),
		tails: map[string]chan struct{}{}, unheard: map[string]protocol.Reply{}}
	s.lostDone = sync.NewCond(&s.mu)
	return s
}

// serve runs the session until the connection ends, then waits for every
// goroutine it started, so nothing of it outlives it. It is the reader.
func (s *session) serve() {
	s.conn.SetReadLimit(protocol.ReadLimitBytes)
	s.armPing()
	err := s.readLoop()
	s.mu.Lock()
	s.ended = true
	if s.pingTimer != nil {
		s.pingTimer.Stop()
	}
	s.mu.Unlock()
	// From here no offer is claimed or written, so an offer whose lease is
	// still running is withdrawn (deliver); then the session is no longer
	// the device's, and says so.
	s.cancel()
	s.g.mu.Lock()
	s.g.unregisterLocked(s)
	s.g.mu.Unlock()
	s.log.Info("session ended", "close_status", int(websocket.CloseStatus(err)), "err", err)
	s.bg.Wait()
	s.withdrawUnheard(websocket.CloseStatus(err))
	if s.takePromised() > 0 {
		s.g.wakeService("") // pass the jobs this session was woken for on
	}
	_ = s.conn.CloseNow()
}

// readLoop reads until the connection ends. Until welcome, reads share one
// deadline, so a client cannot hold a connection without saying hello; its
// timer is stopped once welcomed, so it does not fire in an idle session.
func (s *session) readLoop() error {
	helloCtx, cancelHello := context.WithTimeout(s.ctx, helloTimeout)
	defer cancelHello()
	for {
		ctx := s.ctx
		if helloCtx != nil {
			if s.isWelcomed() {
				cancelHello()
				helloCtx = nil
			} else {
				ctx = helloCtx
			}
		}
		typ, data, err := s.conn.Read(ctx)
		if err != nil {
			return err
		}
		s.g.wakes.frames.Add(1)
		s.handleFrame(typ, data)
	}
}

// handleFrame decodes one frame strictly and dispatches it. A frame that
// does not decode changes nothing but the bad-message count.
func (s *session) handleFrame(typ websocket.MessageType, data []byte) {
	if typ != websocket.MessageText {
		s.badMessage("frames must be JSON text")
		return
	}
	msg, err := protocol.DecodeAgentFrame(data)
	if err != nil {
		s.badMessage(err.Error())
		return
	}
	_, isHello := msg.(*protocol.Hello)
	switch {
	case isHello && s.isWelcomed():
		s.badMessage("hello was already received on this session")
		return
	case !isHello && !s.isWelcomed():
		s.badMessage("the first frame must be hello")
		return
	}
	if !s.begin() {
		// Draining: the close follows; the agent re-sends what went unanswered.
		s.log.Info("draining; frame left for the next session", "type", frameType(msg))
		return
	}
	if id := attemptOf(msg); id != "" {
		s.heard(id)
	}
	switch m := msg.(type) {
	case *protocol.Hello:
		defer s.inflight.Done()
		s.onHello(m)
	case *protocol.Slots:
		defer s.inflight.Done()
		s.onSlots(m)
	case *protocol.Progress:
		s.runOrdered(m.AttemptID, true, func() { s.onProgress(m) })
	case *protocol.Commit:
		s.runOrdered(m.AttemptID, false, func() { s.onCommit(m) })
	case *protocol.Fail:
		s.runOrdered(m.AttemptID, false, func() { s.onFail(m) })
	}
}

// attemptOf is the attempt a device frame names ("" for hello and slots).
func attemptOf(msg any) string {
	switch m := msg.(type) {
	case *protocol.Progress:
		return m.AttemptID
	case *protocol.Commit:
		return m.AttemptID
	case *protocol.Fail:
		return m.AttemptID
	}
	return ""
}

// badMessage answers a frame that could not be understood and closes the
// session with 1008 once it has sent MaxBadMessages of them.
func (s *session) badMessage(reason string) {
	s.g.m.BadMessages.Inc()
	s.bad++
	if len(reason) > 256 {
		reason = reason[:256]
	}
	s.log.Info("bad message", "reason", reason, "count", s.bad)
	if !s.write(&protocol.ErrorMessage{Type: protocol.TypeError, Code: protocol.CodeBadMessage, Message: reason}) {
		return
	}
	if s.bad >= s.g.cfg.MaxBadMessages {
		_ = s.conn.Close(websocket.StatusPolicyViolation, "too many bad messages")
	}
}

// runOrdered handles a frame about one attempt (counted in inflight by
// begin) after every earlier frame about that attempt, so the replies about
// one attempt leave in the order its frames came, as the model answers
// them; frames about different attempts do not wait for each other. Commit
// and fail run in a worker, because verification may take long and must not
// hold up the heartbeats of the device's other attempts; progress runs
// inline in the reader unless it has to queue. The reader takes the
// worker's semaphore slot, so a device flooding frames stalls its own reads.
func (s *session) runOrdered(attemptID string, inline bool, fn func()) {
	s.mu.Lock()
	prev := s.tails[attemptID]
	if inline && prev == nil {
		s.mu.Unlock()
		defer s.inflight.Done()
		fn()
		return
	}
	mine := make(chan struct{})
	s.tails[attemptID] = mine
	s.mu.Unlock()
	s.workers <- struct{}{}
	run := func() {
		defer func() {
			s.mu.Lock()
			if s.tails[attemptID] == mine {
				delete(s.tails, attemptID)
			}
			s.mu.Unlock()
			close(mine)
			<-s.workers
			s.inflight.Done()
		}()
		if prev != nil {
			<-prev
		}
		fn()
	}
	if !s.spawn(run) {
		run()
	}
}

// begin counts a frame as in flight unless the session is draining.
func (s *session) begin() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.draining {
		return false
	}
	s.inflight.Add(1)
	return true
}

// spawn runs fn in a goroutine the session waits for when it ends.
func (s *session) spawn(fn func()) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.spawnLocked(fn)
}

func (s *session) spawnLocked(fn func()) bool {
	if !s.enterLocked() {
		return false
	}
	go func() {
		defer s.bg.Done()
		fn()
	}()
	return true
}

// enterLocked counts a goroutine of the session in bg unless the session
// has ended; serve's Wait then waits for it. Taken under mu, which serve
// sets ended under before it waits, so no Add races the Wait.
func (s *session) enterLocked() bool {
	if s.ended {
		return false
	}
	s.bg.Add(1)
	return true
}

// drain stops new work on the session, waits for the frames and offers in
// flight (their replies are written), and then closes with code.
func (s *session) drain(code websocket.StatusCode, reason string) {
	s.mu.Lock()
	s.draining = true
	s.mu.Unlock()
	s.inflight.Wait()
	_ = s.conn.Close(code, reason)
}

func (s *session) isWelcomed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.welcomed
}

// write sends one frame. It never logs the frame: an offer carries a token.
// An ended session's connection is closed or dead, so nothing is written
// to it: the write could still "succeed" into a socket nobody reads (the
// connection's write lock can win its race with the cancelled context),
// and an offer written there would be taken for delivered.
func (s *session) write(msg any) bool {
	if s.ctx.Err() != nil {
		s.log.Info("write skipped: the session has ended", "type", frameType(msg))
		return false
	}
	ctx, cancel := context.WithTimeout(s.ctx, writeTimeout)
	defer cancel()
	if err := s.conn.Write(ctx, websocket.MessageText, protocol.Encode(msg)); err != nil {
		s.log.Info("write failed", "type", frameType(msg), "err", err)
		return false
	}
	return true
}

// touchIfRejectedVariant is the broken gateway that heartbeats a device
// on a rejected frame, uncoalesced (the window must not hide the bug); the
// constant no-op outside a -tags mutations build.
func (s *session) touchIfRejectedVariant() {
	if s.g.v.heartbeatRejected() {
		if _, err := s.g.pool.Exec(s.g.ctx, store.SQLHeartbeat, s.deviceID, store.NowArg(s.g.now())); err != nil {
			s.log.Warn("heartbeat device", "err", err)
		}
	}
}

// armPing sets the timer of the next heartbeat, Heartbeat from now,
// unless the session has ended.
func (s *session) armPing() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ended {
		s.pingTimer = s.g.cfg.Clock.AfterFunc(s.g.cfg.Heartbeat, s.heartbeat)
	}
}

// heartbeat pings the agent, every Heartbeat, from the timer's goroutine.
// A pong heartbeats an idle device (one without attempts sends no frames);
// a missing pong means a dead peer, whose connection is cut so its session
// and slots go away. Before welcome it only re-arms.
func (s *session) heartbeat() {
	s.mu.Lock()
	entered := s.ctx.Err() == nil && s.enterLocked()
	s.mu.Unlock()
	if !entered {
		return
	}
	defer s.bg.Done()
	s.g.wakes.pings.Add(1)
	if s.isWelcomed() {
		ctx, cancel := context.WithTimeout(s.ctx, s.g.cfg.Heartbeat)
		err := s.conn.Ping(ctx)
		cancel()
		if err != nil {
			if s.ctx.Err() == nil {
				s.log.Info("ping unanswered; closing", "err", err)
			}
			_ = s.conn.CloseNow()
			return
		}
		s.touch()
	}
	s.armPing()
}

// frameType names a frame for logs; never the frame itself, which may
// carry a commit token.
func frameType(msg any) string { return fmt.Sprintf("%T", msg) }
