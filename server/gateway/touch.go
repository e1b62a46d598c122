package gateway

import (
	"time"

	"github.com/rendermac/rendermac/internal/dbstat"
	"github.com/rendermac/rendermac/server/store"
)

// touch is the gateway's own heartbeat of the device, for a frame whose
// decision does not heartbeat it (slots, a refused progress, commit, fail)
// and for a pong: the device is alive, whatever the frame's outcome. It is
// coalesced: nothing is written when this session heartbeat the device
// less than TouchWindow ago (itself, or through a lease or an accepted
// progress). A failure only delays the device's online status.
func (s *session) touch() {
	at := s.g.cfg.Clock.Now()
	s.mu.Lock()
	due := s.lastTouch.IsZero() || at.Sub(s.lastTouch) >= s.g.cfg.TouchWindow
	s.mu.Unlock()
	if !due {
		return
	}
	if _, err := s.g.pool.Exec(dbstat.WithOp(s.g.ctx, OpTouch), store.SQLHeartbeat, s.deviceID, store.NowArg(s.g.now())); err != nil {
		s.log.Warn("heartbeat device", "err", err)
		return
	}
	s.touched(at)
}

// touched records that the device was heartbeat no earlier than at (taken
// before the write that did it, so the window never outlasts the write).
func (s *session) touched(at time.Time) {
	s.mu.Lock()
	if at.After(s.lastTouch) {
		s.lastTouch = at
	}
	s.mu.Unlock()
}
