package soak

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"sync"
	"time"

	"github.com/rendermac/rendermac/benchrun"
	"github.com/rendermac/rendermac/loadgen"
	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/gateway"
	"github.com/rendermac/rendermac/server/gateway/gatewaytest"
)

// Shares of the agents' and buyers' choices.
const (
	// failShare of offers are given back with a retryable fail.
	failShare = 0.05
	// abandonShare of offers are silently dropped: the agent forgets the
	// attempt and the lease expires (the sweeper's work).
	abandonShare = 0.03
	// cancelShare of accepted jobs are cancelled by their buyer a moment later.
	cancelShare = 0.1
	// replyTimeout bounds the wait for the gateway's answer to one frame.
	replyTimeout = 10 * time.Second
)

// agent is one device with one slot. Its session is cut by faults; it then
// reconnects, as the real agent does, and forgets the attempt it held.
type agent struct {
	id, token string

	mu  sync.Mutex
	rng *mrand.Rand
	c   *gatewaytest.Client
}

func newAgent(rng *mrand.Rand) (*agent, error) {
	tok := make([]byte, 24)
	if _, err := rand.Read(tok); err != nil {
		return nil, err
	}
	return &agent{id: protocol.UUIDFrom(rand.Reader), token: "rmsoak_" + hex.EncodeToString(tok), rng: rng}, nil
}

// roll draws from the agent's seeded stream.
func (a *agent) roll() float64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.rng.Float64()
}

// kill cuts the agent's session as a crashed agent would (no close frame);
// it reports whether there was one to cut.
func (a *agent) kill() bool {
	a.mu.Lock()
	c := a.c
	a.mu.Unlock()
	if c == nil {
		return false
	}
	c.Drop()
	return true
}

func (a *agent) run(ctx context.Context, s *stack) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		c, err := a.dial(ctx, s)
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
		a.mu.Lock()
		a.c = c
		a.mu.Unlock()
		a.serve(ctx, s, c)
		a.mu.Lock()
		a.c = nil
		a.mu.Unlock()
		c.Drop()
	}
}

func (a *agent) dial(ctx context.Context, s *stack) (*gatewaytest.Client, error) {
	dctx, cancel := context.WithTimeout(ctx, replyTimeout)
	defer cancel()
	c, resp, err := gatewaytest.Dial(dctx, gatewaytest.WSURL(s.base, gateway.Path), a.token)
	if err != nil {
		if resp != nil {
			return nil, fmt.Errorf("dial: HTTP %d: %w", resp.StatusCode, err)
		}
		return nil, err
	}
	if _, err := c.Hello(dctx, []string{service}, 1, 1); err != nil {
		c.Drop()
		return nil, err
	}
	return c, nil
}

// serve works offers until the session ends.
func (a *agent) serve(ctx context.Context, s *stack, c *gatewaytest.Client) {
	for {
		msg, err := c.Next(ctx)
		if err != nil {
			return
		}
		o, ok := msg.(*protocol.LeaseOffer)
		if !ok {
			continue
		}
		if err := a.work(ctx, s, c, o); err != nil {
			return
		}
	}
}

// work takes one offer to its end: a fail, an abandonment (the session is
// cut, so the slot is not reused while the lease runs out), or progress,
// upload and commit.
func (a *agent) work(ctx context.Context, s *stack, c *gatewaytest.Client, o *protocol.LeaseOffer) error {
	switch r := a.roll(); {
	case r < failShare:
		if err := c.Send(ctx, gatewaytest.Fail(o, protocol.FailDownloadFailed)); err != nil {
			return err
		}
		if _, err := nextFor(ctx, c, o); err != nil {
			return err
		}
		s.fails.Add(1)
		return nil
	case r < failShare+abandonShare:
		return errors.New("abandoned")
	}
	for _, phase := range []protocol.AttemptStatus{protocol.AttemptRunning, protocol.AttemptUploading} {
		if err := c.Send(ctx, gatewaytest.Progress(o, phase)); err != nil {
			return err
		}
		msg, err := nextFor(ctx, c, o)
		if err != nil {
			return err
		}
		switch msg.(type) {
		case *protocol.ProgressOK:
		case *protocol.Cancel:
			// As the real agent does: stop and say so, which finalizes
			// the cancel at once rather than at lease expiry.
			if err := c.Send(ctx, gatewaytest.Fail(o, protocol.FailBuyerCancelled)); err != nil {
				return err
			}
			_, err := nextFor(ctx, c, o)
			return err
		default:
			return nil // lease_conflict: the attempt is over
		}
	}
	out, err := benchrun.UploadSynthetic(ctx, s.httpc, o)
	if err != nil {
		return err
	}
	if err := c.Send(ctx, gatewaytest.Commit(o, out)); err != nil {
		return err
	}
	msg, err := nextFor(ctx, c, o)
	if err != nil {
		return err
	}
	if _, ok := msg.(*protocol.CommitOK); ok {
		s.commits.Add(1)
	}
	return nil
}

// nextFor returns the next frame that ends or answers a frame about o's
// attempt (a cancel for it counts as its answer).
func nextFor(ctx context.Context, c *gatewaytest.Client, o *protocol.LeaseOffer) (any, error) {
	wctx, cancel := context.WithTimeout(ctx, replyTimeout)
	defer cancel()
	for {
		msg, err := c.Next(wctx)
		if err != nil {
			return nil, err
		}
		_, about, _ := protocol.AnswerAbout(msg)
		switch m := msg.(type) {
		case *protocol.Cancel:
			about = m.AttemptID
		case *protocol.LeaseOffer:
			return nil, fmt.Errorf("a second lease_offer on a one-slot session: %s", m.JobID)
		}
		if about == o.AttemptID {
			return msg, nil
		}
	}
}

// submit is the buyers: jobs at cfg.Rate, round-robin over the buyers,
// some cancelled a moment after they were accepted.
func (s *stack) submit(ctx context.Context) {
	rng := mrand.New(mrand.NewPCG(s.cfg.Seed, 2))
	input := []byte("rendermac soak input")
	gap := time.Duration(float64(time.Second) / s.cfg.Rate)
	var wg sync.WaitGroup
	defer wg.Wait()
	for n := 0; ; n++ {
		// Jittered pacing: the mean stays gap.
		pause := time.Duration(float64(gap) * (0.5 + rng.Float64()))
		cancelIt := rng.Float64() < cancelShare
		cancelAfter := time.Duration(rng.IntN(200)) * time.Millisecond
		select {
		case <-ctx.Done():
			return
		case <-time.After(pause):
		}
		b := s.buyers[n%len(s.buyers)]
		wg.Go(func() {
			s.submitted.Add(1)
			job, err := b.CreateJob(ctx, loadgen.JobRequest{Service: service,
				Params: map[string]string{"soak": fmt.Sprint(n)}, Input: input, MaxAttempts: 3})
			if err != nil {
				s.refused.Add(1)
				return
			}
			s.accept(job.ID)
			if cancelIt {
				select {
				case <-ctx.Done():
				case <-time.After(cancelAfter):
				}
				if _, _, err := b.Cancel(context.WithoutCancel(ctx), job.ID); err == nil {
					s.cancels.Add(1)
				}
			}
		})
	}
}
