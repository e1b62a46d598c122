package soak

import (
	"context"
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"sync"
	"time"
)

// Fault kinds, as the report names them.
const (
	FaultPostgresCrash  = "postgres crash + restart"
	FaultPostgresStop   = "postgres stop + restart"
	FaultConnCut        = "db connection cut (proxy reset)"
	FaultGatewayRestart = "control plane restart"
	FaultAgentKill      = "agent session killed"
	FaultWebhookOutage  = "webhook receiver outage (503)"
)

// faultKinds is the draw order; weights favour the cheap faults.
var faultKinds = []struct {
	kind   string
	weight int
}{
	{FaultAgentKill, 4}, {FaultConnCut, 3}, {FaultWebhookOutage, 2}, {FaultGatewayRestart, 2},
	{FaultPostgresCrash, 2}, {FaultPostgresStop, 1},
}

// FaultCounts counts injected faults by kind; safe for concurrent use.
type FaultCounts struct {
	mu sync.Mutex
	n  map[string]int
}

// Add counts one fault of kind.
func (f *FaultCounts) Add(kind string) {
	f.mu.Lock()
	if f.n == nil {
		f.n = map[string]int{}
	}
	f.n[kind]++
	f.mu.Unlock()
}

// Total is the number of faults counted.
func (f *FaultCounts) Total() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	var t int64
	for _, v := range f.n {
		t += int64(v)
	}
	return t
}

func (f *FaultCounts) snapshot() map[string]int { return f.Counts(FaultKinds()) }

// Counts copies the counts of kinds (zero for a kind never counted).
func (f *FaultCounts) Counts(kinds []string) map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]int{}
	for _, k := range kinds {
		out[k] = f.n[k]
	}
	return out
}

// FaultKinds lists the kinds in report order.
func FaultKinds() []string {
	var out []string
	for _, k := range faultKinds {
		out = append(out, k.kind)
	}
	return slices.Clip(out)
}

// injectFaults injects one fault at a time, at seeded pauses, until ctx
// ends. Each fault is whole when the next one starts (Postgres is back,
// the control plane serves again), so faults do not pile up into an
// outage longer than the load.
func (s *stack) injectFaults(ctx context.Context) {
	rng := mrand.New(mrand.NewPCG(s.cfg.Seed, 1))
	total := 0
	for _, k := range faultKinds {
		total += k.weight
	}
	for {
		pause := time.Duration(float64(s.cfg.FaultEvery) * (0.5 + rng.Float64()))
		draw := rng.IntN(total)
		var kind string
		for _, k := range faultKinds {
			if draw < k.weight {
				kind = k.kind
				break
			}
			draw -= k.weight
		}
		// Drawn up front, whatever the fault, so the stream stays aligned.
		outage := time.Duration(300+rng.IntN(1700)) * time.Millisecond
		victim := rng.IntN(len(s.fleet.Agents()))
		select {
		case <-ctx.Done():
			return
		case <-time.After(pause):
		}
		if err := s.inject(ctx, kind, outage, victim); err != nil {
			if ctx.Err() != nil {
				return
			}
			fmt.Fprintf(s.cfg.Log, "soak: fault %s: %v\n", kind, err)
			continue
		}
		s.faults.Add(kind)
	}
}

// inject runs one fault to its end (the system whole again, except for
// the agent and the attempt it forgot).
func (s *stack) inject(ctx context.Context, kind string, outage time.Duration, victim int) error {
	// A restart must not be cut short by the end of the load.
	rctx := context.WithoutCancel(ctx)
	pause := func() { time.Sleep(outage) }
	switch kind {
	case FaultPostgresCrash, FaultPostgresStop:
		var err error
		if kind == FaultPostgresCrash {
			err = s.pg.Crash()
		} else {
			sctx, cancel := context.WithTimeout(rctx, time.Minute)
			err = s.pg.Stop(sctx)
			cancel()
		}
		if err != nil {
			return err
		}
		pause()
		sctx, cancel := context.WithTimeout(rctx, 2*time.Minute)
		defer cancel()
		return s.pg.Start(sctx)
	case FaultConnCut:
		s.proxy.Cut()
		return nil
	case FaultGatewayRestart:
		s.stopPlane()
		pause()
		return s.startPlane(rctx)
	case FaultAgentKill:
		if !s.fleet.Agents()[victim].Kill() {
			return fmt.Errorf("agent %d has no session to kill", victim)
		}
		return nil
	case FaultWebhookOutage:
		s.hook.failing.Store(true)
		pause()
		s.hook.failing.Store(false)
		return nil
	}
	return fmt.Errorf("unknown fault kind %q", kind)
}
