package agent

import (
	"context"
	"os"
	"syscall"
	"time"
)

// DefaultDrainTimeout bounds a graceful drain (RunSignalled) when none is
// given: long enough for a typical render to finish, short enough that a
// Mac being shut down is not held for long.
const DefaultDrainTimeout = 5 * time.Minute

// RunSignalled runs the agent (Run) and treats signals as Buildkite's agent
// does. The first SIGTERM or SIGINT drains (Drain): no new offers, running
// attempts finish and commit, and Run returns once they have. A second
// SIGTERM or SIGINT, a SIGQUIT, or drainTimeout passing since the drain
// began (<= 0: DefaultDrainTimeout) stops at once: running attempts are
// failed as provider_offline (Run's shutdown). sigs is the channel
// signal.Notify fills for those three signals. The bound is real time, not
// the Clock, as it limits how long a process exit may take.
func (a *Agent) RunSignalled(ctx context.Context, sigs <-chan os.Signal, drainTimeout time.Duration) error {
	if drainTimeout <= 0 {
		drainTimeout = DefaultDrainTimeout
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	var bound <-chan time.Time
	for {
		select {
		case err := <-done:
			return err
		case <-bound:
			a.log.Warn("drain timeout: failing running attempts as provider_offline", "drain_timeout", drainTimeout)
			bound = nil
			stop()
		case sig := <-sigs:
			if sig != syscall.SIGQUIT && bound == nil && ctx.Err() == nil {
				a.log.Info("signal: draining; send it again, or SIGQUIT, to stop at once", "signal", sig.String(),
					"drain_timeout", drainTimeout)
				t := time.NewTimer(drainTimeout)
				defer t.Stop()
				bound = t.C
				a.Drain()
				continue
			}
			a.log.Warn("signal: stopping now; running attempts fail as provider_offline", "signal", sig.String())
			bound = nil
			stop()
		}
	}
}
