package model

import (
	"fmt"

	"github.com/rendermac/rendermac/protocol"
)

// snapshotViolations is a second, from-scratch check of SPEC section 4 over a
// Snapshot alone, the way the harness checks Postgres: it shares no code
// with the incremental checker, so the two keep each other honest.
func snapshotViolations(s protocol.Snapshot, credits map[string]int64) []string {
	c := &snapCheck{s: s, jobs: map[string]protocol.JobRow{}, replayedJob: map[string]string{},
		replayedAttempt: map[string]string{}, liveByJob: map[string]int{}, liveByDevice: map[string]int{},
		numbers: map[string][]int{}, withdrawn: map[string]int{}}
	for _, j := range s.Jobs {
		c.jobs[j.ID] = j
	}
	c.journal()
	c.attempts()
	c.jobRows()
	c.money(credits)
	for _, d := range s.Devices {
		if d.LiveAttempts != c.liveByDevice[d.ID] {
			c.bad("device %s reports %d live attempts, rows say %d", d.ID, d.LiveAttempts, c.liveByDevice[d.ID])
		}
	}
	return c.out
}

type snapCheck struct {
	s                            protocol.Snapshot
	jobs                         map[string]protocol.JobRow
	replayedJob, replayedAttempt map[string]string
	liveByJob, liveByDevice      map[string]int
	numbers                      map[string][]int
	withdrawn                    map[string]int // by job: its attempts failed offer_withdrawn
	out                          []string
}

func (c *snapCheck) bad(format string, args ...any) {
	c.out = append(c.out, fmt.Sprintf(format, args...))
}

func (c *snapCheck) journal() {
	for i, e := range c.s.Journal {
		from, to := e.From, e.To
		switch e.Kind {
		case "job":
			if (from == "" && to != string(protocol.JobQueued)) ||
				(from != "" && protocol.AssertJobTransition(protocol.JobStatus(from), protocol.JobStatus(to)) != nil) {
				c.bad("journal %d: job %s -> %s", i, from, to)
			}
			if c.replayedJob[e.JobID] != from {
				c.bad("journal %d: job %s from %s, replay had %s", i, e.JobID, from, c.replayedJob[e.JobID])
			}
			c.replayedJob[e.JobID] = to
		case "attempt":
			if (from == "" && to != string(protocol.AttemptLeased)) || (from != "" &&
				protocol.AssertAttemptTransition(protocol.AttemptStatus(from), protocol.AttemptStatus(to)) != nil) {
				c.bad("journal %d: attempt %s -> %s", i, from, to)
			}
			if c.replayedAttempt[e.AttemptID] != from {
				c.bad("journal %d: attempt %s from %s, replay had %s", i, e.AttemptID, from, c.replayedAttempt[e.AttemptID])
			}
			c.replayedAttempt[e.AttemptID] = to
		default:
			c.bad("journal %d: kind %q", i, e.Kind)
		}
	}
}

func (c *snapCheck) attempts() {
	hashes := map[string]bool{}
	for _, a := range c.s.Attempts {
		if c.replayedAttempt[a.ID] != string(a.Status) {
			c.bad("attempt %s is %s, replays to %s", a.ID, a.Status, c.replayedAttempt[a.ID])
		}
		if a.Status.Live() {
			c.liveByJob[a.JobID]++
			c.liveByDevice[a.DeviceID]++
		}
		c.numbers[a.JobID] = append(c.numbers[a.JobID], a.Number)
		if !protocol.ValidTokenHash(a.TokenHash) || hashes[a.TokenHash] {
			c.bad("attempt %s token hash %q invalid or shared", a.ID, a.TokenHash)
		}
		hashes[a.TokenHash] = true
		if a.Number-c.withdrawn[a.JobID] > c.jobs[a.JobID].MaxAttempts {
			c.bad("attempt %s number %d after %d withdrawn offers past budget", a.ID, a.Number, c.withdrawn[a.JobID])
		}
		if a.FailureCode == protocol.FailOfferWithdrawn {
			c.withdrawn[a.JobID]++
		}
	}
}

func (c *snapCheck) jobRows() {
	for _, j := range c.s.Jobs {
		if c.replayedJob[j.ID] != string(j.Status) {
			c.bad("job %s is %s, replays to %s", j.ID, j.Status, c.replayedJob[j.ID])
		}
		if c.liveByJob[j.ID] > 1 || (j.Status.Terminal() && c.liveByJob[j.ID] > 0) {
			c.bad("job %s (%s) has %d live attempts", j.ID, j.Status, c.liveByJob[j.ID])
		}
		for i, n := range c.numbers[j.ID] {
			if n != i+1 {
				c.bad("job %s attempt numbers %v", j.ID, c.numbers[j.ID])
				break
			}
		}
		if len(c.numbers[j.ID]) != j.AttemptCount {
			c.bad("job %s attempt_count %d with %d attempts", j.ID, j.AttemptCount, len(c.numbers[j.ID]))
		}
		if c.withdrawn[j.ID] != j.WithdrawnCount {
			c.bad("job %s withdrawn_count %d with %d withdrawn offers", j.ID, j.WithdrawnCount, c.withdrawn[j.ID])
		}
		want, webhooks := protocol.HoldHeld, 0
		switch {
		case j.Status == protocol.JobSucceeded:
			want, webhooks = protocol.HoldCaptured, 1
		case j.Status.Terminal():
			want, webhooks = protocol.HoldReleased, 1
		}
		if j.HoldStatus != want || j.Webhooks != webhooks {
			c.bad("%s job %s hold %s webhooks %d", j.Status, j.ID, j.HoldStatus, j.Webhooks)
		}
		if (j.Status == protocol.JobSucceeded) != (j.SucceededAttemptID != "") {
			c.bad("%s job %s succeeded_attempt_id %q", j.Status, j.ID, j.SucceededAttemptID)
		}
	}
}

func (c *snapCheck) money(credits map[string]int64) {
	held := map[string]int64{}
	captured := map[string]int64{}
	for _, j := range c.s.Jobs {
		switch j.HoldStatus {
		case protocol.HoldHeld:
			held[j.BuyerID] += j.HoldCents
		case protocol.HoldCaptured:
			captured[j.BuyerID] += j.HoldCents
		}
	}
	for _, b := range c.s.Buyers {
		if b.HeldCents != held[b.ID] || b.CapturedCents != captured[b.ID] ||
			b.BalanceCents+b.HeldCents+b.CapturedCents != credits[b.ID] {
			c.bad("buyer %+v: holds sum to held %d captured %d, credited %d", b, held[b.ID], captured[b.ID],
				credits[b.ID])
		}
	}
}
