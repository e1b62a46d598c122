package soak

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"sync"
	"time"

	"github.com/rendermac/rendermac/client"
	"github.com/rendermac/rendermac/harness/loadgen"
	"github.com/rendermac/rendermac/protocol"
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

// chooser is one agent's seeded stream of choices.
type chooser struct {
	mu  sync.Mutex
	rng *mrand.Rand
}

// roll draws from the agent's seeded stream.
func (c *chooser) roll() float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rng.Float64()
}

// newFleet is the soak's agents: one slot each, reconnecting after every
// cut session and forgetting the attempt they held, as the real agent does.
func (s *stack) newFleet(devices []loadgen.Device) *loadgen.Fleet {
	return loadgen.NewFleet(loadgen.FleetConfig{BaseURL: s.base, Service: service, Slots: 1, HTTP: s.httpc,
		DialTimeout: replyTimeout, ReplyTimeout: replyTimeout, Reconnect: true, Work: s.work}, devices)
}

// work takes one offer to its end: a fail, an abandonment (the error cuts
// the session, so the slot is not reused while the lease runs out), or
// progress, upload and commit.
func (s *stack) work(ctx context.Context, at *loadgen.Attempt) error {
	switch r := s.choosers[at.Agent.Index].roll(); {
	case r < failShare:
		if _, err := at.Fail(ctx, protocol.FailDownloadFailed); err != nil {
			return err
		}
		s.fails.Add(1)
		return nil
	case r < failShare+abandonShare:
		return errors.New("abandoned")
	}
	for _, phase := range []protocol.AttemptStatus{protocol.AttemptRunning, protocol.AttemptUploading} {
		msg, err := at.Progress(ctx, phase)
		if err != nil {
			return err
		}
		switch msg.(type) {
		case *protocol.ProgressOK:
		case *protocol.Cancel:
			// As the real agent does: stop and say so, which finalizes
			// the cancel at once rather than at lease expiry.
			_, err := at.Fail(ctx, protocol.FailBuyerCancelled)
			return err
		default:
			return nil // lease_conflict: the attempt is over
		}
	}
	out, err := at.Upload(ctx)
	if err != nil {
		return err
	}
	msg, _, err := at.Commit(ctx, out)
	if err != nil {
		return err
	}
	if _, ok := msg.(*protocol.CommitOK); ok {
		s.commits.Add(1)
	}
	return nil
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
			created, err := b.Create(ctx, client.CreateRequest{Service: service,
				Params: map[string]string{"seed": "soak-" + fmt.Sprint(n)}, Input: input, MaxAttempts: new(3)})
			if err != nil {
				s.refused.Add(1)
				return
			}
			job := created.Job
			s.accepted.Add(job.ID)
			if cancelIt {
				select {
				case <-ctx.Done():
				case <-time.After(cancelAfter):
				}
				if _, err := b.Cancel(context.WithoutCancel(ctx), job.ID); err == nil {
					s.cancels.Add(1)
				}
			}
		})
	}
}
