package fleet

import (
	"context"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

const syscallSIGCONT = syscall.SIGCONT

// Fault kinds, as the report names them.
const (
	FaultMacSleep     = "Mac sleep (agent SIGSTOP past the lease TTL, SIGCONT)"
	FaultWiFiLoss     = "Wi-Fi loss (agent's paths black-holed, healed)"
	FaultDiskFull     = "disk exhaustion (agent's work dir filled, freed)"
	FaultGatewayKill  = "gateway SIGKILL + restart"
	FaultPostgresKill = "postgres crash + restart"
	FaultStoreOutage  = "object-store outage (versitygw stopped, restarted)"
	// FaultPrimaryKill and FaultSwitchover need the Patroni cluster
	// (Config.Postgres patroni), where they replace FaultPostgresKill.
	FaultPrimaryKill = "primary killed (standbys' WAL held back, leader's Patroni + Postgres SIGKILL, promotion, rejoin)"
	FaultSwitchover  = "switchover (planned, to the synchronous standby)"
)

// FaultKinds lists the kinds in report order.
func FaultKinds() []string {
	return []string{FaultMacSleep, FaultWiFiLoss, FaultDiskFull, FaultGatewayKill, FaultPostgresKill, FaultStoreOutage,
		FaultPrimaryKill, FaultSwitchover}
}

// injectFaults injects one fault at a time, at seeded pauses, until
// Duration has passed (from start) and every kind this run can inject has
// been injected at least once, or ctx ends; each is healed before the next
// starts. The kinds are drawn in seeded shuffled rounds, so every kind
// occurs about equally often, and the first round is always finished: a
// short run on a slow machine still shows every kind.
func (r *run) injectFaults(ctx context.Context, start time.Time) {
	rng := mrand.New(mrand.NewPCG(r.cfg.Seed, 1))
	var round []string
	rounds := 0
	over := func() bool { return ctx.Err() != nil || (rounds > 0 && time.Since(start) >= r.cfg.Duration) }
	for !over() {
		if len(round) == 0 {
			round = FaultKinds()
			rng.Shuffle(len(round), func(i, j int) { round[i], round[j] = round[j], round[i] })
			if rounds == 0 {
				round = primaryLossesFirst(round)
			}
		}
		kind := round[0]
		round = round[1:]
		pause := time.Duration(float64(r.cfg.FaultEvery) * (0.5 + rng.Float64()))
		outage := time.Duration(500+rng.IntN(2000)) * time.Millisecond
		victim := rng.IntN(len(r.agents))
		gw := rng.IntN(len(r.gws))
		select {
		case <-ctx.Done():
			return
		case <-time.After(pause):
		}
		if len(round) == 0 {
			rounds++
		}
		if !r.injectable(kind) {
			continue // reported as not injected
		}
		began := time.Now()
		if err := r.inject(ctx, kind, outage, victim, gw); err != nil {
			fmt.Fprintf(r.cfg.Log, "fleet: fault %s: %v\n", kind, err)
			continue
		}
		fmt.Fprintf(r.cfg.Log, "fleet: %s at %s of load, healed in %s\n", kind, began.Sub(start).Round(time.Millisecond),
			time.Since(began).Round(time.Millisecond))
		r.faults.Add(kind)
		r.lastHeal.Store(time.Now().UnixNano())
	}
}

// primaryLossesFirst moves the primary kill and the switchover to the
// front of the first round: their outages leave the longest backlog,
// which the rest of the round's load then works off instead of the drain
// (a short run, qualify's, ends its load with the first round).
func primaryLossesFirst(round []string) []string {
	var first, rest []string
	for _, k := range round {
		if k == FaultPrimaryKill || k == FaultSwitchover {
			first = append(first, k)
		} else {
			rest = append(rest, k)
		}
	}
	return append(first, rest...)
}

// injectable says whether this run can inject kind: a full disk needs
// size-limited work dirs, an object-store outage the S3 store.
func (r *run) injectable(kind string) bool {
	switch kind {
	case FaultDiskFull:
		return r.tmpfsOK
	case FaultStoreOutage:
		return r.s3 != nil
	case FaultPostgresKill:
		return r.pat == nil
	case FaultPrimaryKill, FaultSwitchover:
		return r.pat != nil
	}
	return true
}

// inject runs one fault to its heal.
func (r *run) inject(ctx context.Context, kind string, outage time.Duration, victim, gw int) error {
	rctx := context.WithoutCancel(ctx)
	a := r.agents[victim]
	switch kind {
	case FaultMacSleep:
		if !a.signal(syscall.SIGSTOP) {
			return fmt.Errorf("agent %d is not running", victim)
		}
		time.Sleep(leaseTTL + outage)
		a.signal(syscall.SIGCONT)
		return nil
	case FaultWiFiLoss:
		before := a.forwarded()
		for _, p := range a.paths {
			p.BlackHole()
		}
		time.Sleep(outage)
		healed := time.Now()
		for _, p := range a.paths {
			p.Heal()
		}
		// The agent must notice its dead connection and be back.
		bound := ReconnectBound()
		for a.forwarded() == before {
			if time.Since(healed) > bound {
				r.violation("agent %d had no new connection %s after a Wi-Fi loss healed (bound %s): it did not notice its dead connection",
					victim, time.Since(healed).Round(time.Millisecond), bound)
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		return nil
	case FaultDiskFull:
		if _, err := fillDisk(a.work, 256<<10); err != nil {
			return err
		}
		time.Sleep(outage + time.Second)
		return os.Remove(filepath.Join(a.work, "ballast"))
	case FaultGatewayKill:
		g := r.gws[gw]
		g.kill()
		time.Sleep(outage)
		if err := g.start(); err != nil {
			return err
		}
		return r.waitReady(rctx, g.url(), time.Minute)
	case FaultPostgresKill:
		if err := r.pg.Crash(); err != nil {
			return err
		}
		time.Sleep(outage)
		sctx, cancel := context.WithTimeout(rctx, 2*time.Minute)
		defer cancel()
		return r.pg.Start(sctx)
	case FaultStoreOutage:
		return r.storeOutage(rctx, outage)
	case FaultPrimaryKill:
		return r.primaryKill(rctx, outage)
	case FaultSwitchover:
		return r.switchover(rctx)
	}
	return fmt.Errorf("unknown fault kind %q", kind)
}
