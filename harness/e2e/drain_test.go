package e2e

import (
	"context"
	"maps"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/agent/runner"
	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/protocol/buyer"
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

	s.waitJob(later.ID, "queued, waiting for another device", func(d buyer.JobDetail) bool {
		return d.Status == protocol.JobQueued
	})
	// The gateway counts a slot free after the commit, so it may offer the
	// later job: an offer that reached the draining agent is refused
	// no_capacity; one the agent closed its session on without answering,
	// or that could not be written to the closed session, is withdrawn
	// (offer_withdrawn, no budget spent). Nothing ran it.
	for _, r := range s.attemptRows(later.ID) {
		require.Equal(t, "failed", r.Status, "an offer made to the draining agent is refused or withdrawn, never run")
		require.Contains(t, []string{string(protocol.FailNoCapacity), string(protocol.FailOfferWithdrawn)}, r.Failure)
	}
}

// TestAgentStopsAtOnceOnSecondSignal: while a drain waits for a long
// attempt, a second SIGTERM, a SIGQUIT or the drain timeout running out
// fails the attempt as provider_offline (retryable) and the process exits
// 0. That fail frees no slot in the gateway's view, so the stopping agent
// is offered nothing more: the job is queued again with its one attempt
// the one the agent failed (before issue 48 the gateway offered it
// straight back, the agent failed it again, and an offer written as it
// closed was charged too: three attempts in 7 ms, the job failed). Another
// agent then runs the job to success.
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
			s.waitJob(job.ID, "queued again (provider_offline is retryable)", func(d buyer.JobDetail) bool {
				return d.Status == protocol.JobQueued
			})
			rows := s.attemptRows(job.ID)
			require.Equal(t, []attemptRow{{Number: 1, Status: "failed", DeviceID: creds.DeviceID, Epoch: 1,
				TokenHash: rows[0].TokenHash, Failure: string(protocol.FailProviderOffline)}}, rows,
				"the stopping agent is offered nothing more: one attempt spent, the one it failed")
			require.Equal(t, 1, strings.Count(child.logs.String(), `msg="lease offer"`), "no offer but the first reached the agent")

			requireTakenOver(t, s, job.ID, creds.DeviceID, 1)
		})
	}
}

// TestSecondSignalWithTwoRunningJobsKeepsTheirBudget is issue 48 as a new
// user met it: one agent process holding two running jobs gets SIGTERM and
// then a second SIGTERM. Each attempt is failed provider_offline, neither
// job is offered back to the stopping agent, and the agent's normal closure
// withdraws nothing it had answered: each job is queued with one of its
// three attempts spent, and a second agent runs both to success.
func TestSecondSignalWithTwoRunningJobsKeepsTheirBudget(t *testing.T) {
	s := newStack(t)
	creds, tokenFile := s.pair(runner.ServiceSynthetic)
	child := startChildAgent(t, tokenFile, envDrainTimeout+"=2m", envSlots+"=2")
	jobs := []buyer.JobDetail{
		s.createJob(runner.ServiceSynthetic, map[string]string{"seed": "two-a", "delay_ms": "120000"}, nil),
		s.createJob(runner.ServiceSynthetic, map[string]string{"seed": "two-b", "delay_ms": "120000"}, nil),
	}
	for _, j := range jobs {
		s.waitAttemptStatus(j.ID, 1, protocol.AttemptRunning)
	}
	child.signal(t, syscall.SIGTERM)
	child.waitLog(t, "draining")
	child.signal(t, syscall.SIGTERM)
	require.NoError(t, child.waitExit(t, 60*time.Second))
	require.Contains(t, child.logs.String(), "signal: stopping now")
	for _, j := range jobs {
		s.waitJob(j.ID, "queued again", func(d buyer.JobDetail) bool { return d.Status == protocol.JobQueued })
		rows := s.attemptRows(j.ID)
		require.Equal(t, []attemptRow{{Number: 1, Status: "failed", DeviceID: creds.DeviceID, Epoch: 1,
			TokenHash: rows[0].TokenHash, Failure: string(protocol.FailProviderOffline)}}, rows,
			"job %s: one attempt spent, the one the stopping agent failed", j.ID)
	}
	other, _ := s.pair(runner.ServiceSynthetic)
	runAgent(t, "taking-over agent", other, agentOptions{slots: 2, runners: fastSynthetic()})
	for _, j := range jobs {
		d := s.waitTerminal(j.ID)
		s.requireSucceededOutput(d)
		rows := s.attemptRows(j.ID)
		require.Len(t, rows, 2, describe(d))
		require.Equal(t, attemptRow{Number: 2, Status: "succeeded", DeviceID: other.DeviceID, Epoch: 1,
			TokenHash: rows[1].TokenHash}, rows[1])
		s.requireOneSettledHold(j.ID, "captured")
	}
}

// requireTakenOver starts a second agent (in this process) and requires
// that it runs the queued job to success as its attempt spent+1, after the
// spent attempts of the agent on stopped, and nothing else.
func requireTakenOver(t *testing.T, s *stack, jobID, stopped string, spent int) {
	t.Helper()
	other, _ := s.pair(runner.ServiceSynthetic)
	runAgent(t, "taking-over agent", other, agentOptions{runners: fastSynthetic()})
	d := s.waitTerminal(jobID)
	s.requireSucceededOutput(d)
	rows := s.attemptRows(jobID)
	require.Len(t, rows, spent+1, describe(d))
	for _, r := range rows[:spent] {
		require.Equal(t, stopped, r.DeviceID)
	}
	require.Equal(t, attemptRow{Number: spent + 1, Status: "succeeded", DeviceID: other.DeviceID, Epoch: 1,
		TokenHash: rows[spent].TokenHash}, rows[spent])
	s.requireOneSettledHold(jobID, "captured")
}

// fastSynthetic is the synthetic runner without the delay_ms wait: the
// agent that takes over a job a stopped agent gave up renders it at once,
// where the stopped one was still rendering (the wait is what kept its
// attempt running until the signals came).
func fastSynthetic() map[string]runner.Runner {
	return map[string]runner.Runner{runner.ServiceSynthetic: noDelay{runner.Synthetic{}}}
}

type noDelay struct{ runner.Synthetic }

func (n noDelay) Run(ctx context.Context, spec runner.Spec, in, out string) error {
	spec.Params = maps.Clone(spec.Params)
	delete(spec.Params, "delay_ms")
	return n.Synthetic.Run(ctx, spec, in, out)
}
