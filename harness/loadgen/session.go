package loadgen

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rendermac/rendermac/harness/deviceclient"
	"github.com/rendermac/rendermac/protocol"
)

// session is one gateway session of an agent: its reader routes every
// frame about an attempt to that attempt's Work, and each lease_offer
// starts a Work.
type session struct {
	c *deviceclient.Client
	// ended is closed when the reader stops, so a Work waiting for an
	// answer learns at once that none will come.
	ended chan struct{}

	mu sync.Mutex
	// free holds the instants slots freed (hello, or a commit_ok), oldest
	// first: an offer fills the slot that has waited longest.
	free    []time.Time
	waiting map[string]chan any
	workers sync.WaitGroup
}

func newSession(c *deviceclient.Client, slots int) *session {
	s := &session{c: c, ended: make(chan struct{}), waiting: map[string]chan any{}}
	now := time.Now()
	for range slots {
		s.free = append(s.free, now)
	}
	return s
}

// slotFreed records that a slot freed at t.
func (s *session) slotFreed(t time.Time) {
	s.mu.Lock()
	s.free = append(s.free, t)
	s.mu.Unlock()
}

// take registers o's attempt and returns the instant its slot freed.
func (s *session) take(o *protocol.LeaseOffer, slots int) (time.Time, chan any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.waiting) >= slots {
		return time.Time{}, nil, fmt.Errorf("lease_offer %s on a session whose %d slots are all busy", o.JobID, slots)
	}
	var freed time.Time
	if len(s.free) > 0 {
		freed, s.free = s.free[0], s.free[1:]
	}
	ch := make(chan any, 16)
	s.waiting[o.AttemptID] = ch
	return freed, ch, nil
}

func (s *session) release(attemptID string) {
	s.mu.Lock()
	delete(s.waiting, attemptID)
	s.mu.Unlock()
}

// final says whether msg is the last frame about its attempt: after it the
// gateway counts the slot free and may offer it again at once.
func final(msg any) bool {
	_, _, answer := protocol.AnswerAbout(msg)
	_, ok := msg.(*protocol.ProgressOK)
	return answer && !ok
}

// route hands a frame to the Work of the attempt it is about: an answer,
// or a cancel of the attempt.
func (s *session) route(msg any) {
	_, id, ok := protocol.AnswerAbout(msg)
	if c, isCancel := msg.(*protocol.Cancel); isCancel {
		id, ok = c.AttemptID, true
	}
	if !ok {
		return // nothing else is about an attempt
	}
	s.mu.Lock()
	ch := s.waiting[id]
	if final(msg) {
		// Freed here, in the reader, not when the Work gets to it: the
		// gateway may offer the slot again right behind this frame.
		delete(s.waiting, id)
	}
	s.mu.Unlock()
	if ch != nil {
		select {
		case ch <- msg:
		default: // a Work never has more than one frame outstanding
		}
	}
}

// serve reads the session until it ends: each lease_offer starts a Work
// (at most Slots at once), every other frame goes to its attempt's Work.
func (a *Agent) serve(ctx context.Context, s *session) {
	f := a.f
	defer s.workers.Wait()
	defer close(s.ended)
	for {
		msg, err := s.c.Next(ctx)
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, deviceclient.ErrClosed) {
				f.report(fmt.Errorf("agent %s: %w", a.ID, err))
			}
			return
		}
		o, ok := msg.(*protocol.LeaseOffer)
		if !ok {
			s.route(msg)
			continue
		}
		freed, ch, err := s.take(o, f.cfg.Slots)
		if err != nil {
			f.report(fmt.Errorf("agent %s: %w", a.ID, err))
			return
		}
		at := &Attempt{Offer: o, Agent: a, Freed: freed, s: s, ch: ch}
		s.workers.Go(func() {
			defer s.release(o.AttemptID)
			err := f.cfg.Work(ctx, at)
			if err == nil {
				if !at.committed.IsZero() {
					s.slotFreed(at.committed)
				}
				return
			}
			if f.cfg.Reconnect {
				s.c.Drop()
			}
			if ctx.Err() == nil {
				f.report(fmt.Errorf("agent %s job %s: %w", a.ID, o.JobID, err))
			}
		})
	}
}
