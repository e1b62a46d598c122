package loadgen

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rendermac/rendermac/harness/deviceclient"
	"github.com/rendermac/rendermac/protocol"
)

// ErrSessionEnded is a wait for an answer cut short by the end of the
// attempt's session.
var ErrSessionEnded = errors.New("the session ended")

// Attempt is one offered attempt as a Work sees it: each method sends one
// frame about it and returns the gateway's answer.
type Attempt struct {
	Offer *protocol.LeaseOffer
	Agent *Agent
	// Freed is when the slot this attempt fills became free: the hello, or
	// the commit_ok of the slot's previous attempt.
	Freed time.Time

	s  *session
	ch chan any
	// over is set by a final answer: nothing more will come about it.
	over bool
	// committed is when a commit_ok came, freeing the slot.
	committed time.Time
}

// Progress reports status and returns the answer: *protocol.ProgressOK,
// *protocol.LeaseConflict, or a *protocol.Cancel that came first.
func (at *Attempt) Progress(ctx context.Context, status protocol.AttemptStatus) (any, error) {
	return at.exchange(ctx, deviceclient.Progress(at.Offer, status))
}

// Fail gives the attempt back with code and returns the answer.
func (at *Attempt) Fail(ctx context.Context, code protocol.FailureCode) (any, error) {
	return at.exchange(ctx, deviceclient.Fail(at.Offer, code))
}

// Upload PUTs a small valid MP4 to the offer's grant URL (UploadSynthetic).
func (at *Attempt) Upload(ctx context.Context) (protocol.Output, error) {
	return UploadSynthetic(ctx, at.Agent.f.cfg.HTTP, at.Offer)
}

// Commit commits out and returns the answer and the instant it came. A
// commit_ok frees the slot at that instant once the Work returns nil.
func (at *Attempt) Commit(ctx context.Context, out protocol.Output) (any, time.Time, error) {
	msg, err := at.exchange(ctx, deviceclient.Commit(at.Offer, out))
	answered := time.Now()
	if _, ok := msg.(*protocol.CommitOK); ok {
		at.committed = answered
	}
	return msg, answered, err
}

// exchange sends msg and waits for the next frame about the attempt.
func (at *Attempt) exchange(ctx context.Context, msg any) (any, error) {
	if at.over {
		return nil, fmt.Errorf("attempt %s already had its last answer", at.Offer.AttemptID)
	}
	if err := at.s.c.Send(ctx, msg); err != nil {
		return nil, err
	}
	reply, err := at.next(ctx)
	if err != nil {
		return nil, err
	}
	at.over = final(reply)
	return reply, nil
}

// next returns the next frame about the attempt.
func (at *Attempt) next(ctx context.Context) (any, error) {
	wait := at.Agent.f.cfg.ReplyTimeout
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case msg := <-at.ch:
		return msg, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-at.s.ended:
		select { // routed before the reader stopped
		case msg := <-at.ch:
			return msg, nil
		default:
			return nil, ErrSessionEnded
		}
	case <-t.C:
		return nil, fmt.Errorf("no reply within %s", wait)
	}
}
