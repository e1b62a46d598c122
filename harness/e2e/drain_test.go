package e2e

import (
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/agent/runner"
	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/api"
)

// TestAgentSIGTERMDrains: a real agent process (RunSignalled, as `rendermac
// agent` runs it) gets SIGTERM while an attempt runs. It takes no new work
// (a job created after the signal is never run by it; an offer that still
// arrives is refused no_capacity), the running attempt finishes and
// commits, and the process exits 0 on its own.
func TestAgentSIGTERMDrains(t *testing.T) {
	s := newStack(t)
	creds, tokenFile := s.pair(runner.ServiceSynthetic)
	child := startChildAgent(t, tokenFile, envDrainTimeout+"=2m")

	job := s.createJob(runner.ServiceSynthetic, map[string]string{"seed": "drain", "delay_ms": "3000"}, nil)
	s.waitAttemptStatus(job.ID, 1, protocol.AttemptRunning)
	child.signal(t, syscall.SIGTERM)
	child.waitLog(t, "draining")
	later := s.createJob(runner.ServiceSynthetic, map[string]string{"seed": "after-sigterm"}, nil)

	require.NoError(t, child.waitExit(t, 60*time.Second), "a drained agent exits 0")
	require.Contains(t, child.logs.String(), "drained: every attempt ended")
	d := s.waitTerminal(job.ID)
	s.requireSucceededOutput(d)
	require.Equal(t, []attemptRow{{Number: 1, Status: "succeeded", DeviceID: creds.DeviceID, Epoch: 1,
		TokenHash: s.attemptRows(job.ID)[0].TokenHash}}, s.attemptRows(job.ID), "the running attempt committed after SIGTERM")
	s.requireOneSettledHold(job.ID, "captured")

	l := s.job(later.ID)
	require.Equal(t, protocol.JobQueued, l.Status, "the job created after SIGTERM waits for another device: %s", describe(l))
	// The gateway counts a slot free after the commit, so it may offer the
	// later job: an offer that reached the draining agent is refused
	// no_capacity; one written after the agent closed its session is given
	// back provider_offline. Either is retryable, and nothing ran it.
	for _, r := range s.attemptRows(later.ID) {
		require.Equal(t, "failed", r.Status, "an offer made to the draining agent is refused or given back, never run")
		require.Contains(t, []string{string(protocol.FailNoCapacity), string(protocol.FailProviderOffline)}, r.Failure)
	}
}

// TestAgentStopsAtOnceOnSecondSignal: while a drain waits for a long
// attempt, a second SIGTERM, a SIGQUIT or the drain timeout running out
// fails the attempt as provider_offline (retryable: the job is queued
// again) and the process exits 0.
func TestAgentStopsAtOnceOnSecondSignal(t *testing.T) {
	for _, tc := range []struct {
		name   string
		second os.Signal // nil: wait for the drain timeout
		drain  string
	}{
		{"second_sigterm", syscall.SIGTERM, "2m"},
		{"sigquit", syscall.SIGQUIT, "2m"},
		{"drain_timeout", nil, "1s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStack(t)
			creds, tokenFile := s.pair(runner.ServiceSynthetic)
			child := startChildAgent(t, tokenFile, envDrainTimeout+"="+tc.drain)
			job := s.createJob(runner.ServiceSynthetic, map[string]string{"seed": "stop", "delay_ms": "120000"}, nil)
			s.waitAttemptStatus(job.ID, 1, protocol.AttemptRunning)
			child.signal(t, syscall.SIGTERM)
			child.waitLog(t, "draining")
			if tc.second != nil {
				child.signal(t, tc.second)
			}
			require.NoError(t, child.waitExit(t, 60*time.Second))
			if tc.second != nil {
				require.Contains(t, child.logs.String(), "signal: stopping now")
			} else {
				require.Contains(t, child.logs.String(), "drain timeout")
			}
			// The failed attempt frees the slot before the session closes,
			// so the gateway may offer the requeued job once more. That
			// offer is never run: it is refused (no_capacity), or given
			// back once the session is gone (provider_offline), or, when
			// it went into the socket as the agent closed it, left unread
			// until the sweeper finds its lease expired (lost). The job is
			// queued again when it has been.
			d := s.waitJob(job.ID, "queued again (provider_offline is retryable)", func(d api.JobDetail) bool {
				return d.Status == protocol.JobQueued
			})
			rows := s.attemptRows(job.ID)
			require.NotEmpty(t, rows)
			require.Equal(t, attemptRow{Number: 1, Status: "failed", DeviceID: creds.DeviceID, Epoch: 1,
				TokenHash: rows[0].TokenHash, Failure: string(protocol.FailProviderOffline)}, rows[0])
			for _, a := range d.Attempts[1:] { // as read with the queued job
				for _, line := range strings.Split(child.logs.String(), "\n") {
					if strings.Contains(line, a.ID) {
						require.NotContains(t, line, "type=progress", "an offer made to the stopping agent is never run")
					}
				}
				switch a.Status {
				case protocol.AttemptFailed:
					require.Contains(t, []string{string(protocol.FailNoCapacity), string(protocol.FailProviderOffline)}, a.FailureCode)
				case protocol.AttemptLost:
				default:
					require.Failf(t, "an offer made to the stopping agent is refused, given back or lost", "attempt %d is %s", a.Number, a.Status)
				}
			}
		})
	}
}
