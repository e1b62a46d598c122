package model

import (
	"fmt"

	"github.com/rendermac/rendermac/protocol"
)

// checker is the incremental invariant checker's state. It is written only
// by CheckInvariants and read by nothing else, except that Lease hands it
// each plaintext token (offered), which no operation keeps.
type checker struct {
	journalSeen  int
	attemptsSeen int
	dirtyJobs    []*job
	dirtyDevices []*device
	dirtyBuyers  []*buyer
	// pruned are the jobs Prune removed since the last check: their holds
	// leave the buyers' tallies.
	pruned []*job
	// plaintexts is every token ever offered and pending the ones offered
	// since the last check; hashes maps each stored hash to its attempt.
	plaintexts map[string]struct{}
	pending    []string
	hashes     map[string]string
	out        []protocol.Violation
}

func newChecker() checker {
	return checker{plaintexts: make(map[string]struct{}), hashes: make(map[string]string)}
}

// offered keeps a plaintext token for invariant 6 only.
func (c *checker) offered(token string) {
	c.plaintexts[token] = struct{}{}
	c.pending = append(c.pending, token)
}

func (c *checker) touchBuyer(b *buyer) {
	if !b.dirty {
		b.dirty = true
		c.dirtyBuyers = append(c.dirtyBuyers, b)
	}
}

func (c *checker) fail(inv int, format string, args ...any) {
	c.out = append(c.out, protocol.Violation{Invariant: inv, Message: fmt.Sprintf(format, args...)})
}

// CheckInvariants returns every violation of SPEC section 4 introduced since
// the previous call that the model can see, or nil when all hold. It replays
// the new journal rows, checks the new attempts' token hashes and re-checks
// every job, device and buyer touched since then against the checker's own
// tallies; the cost is proportional to what changed, not to the model's
// size, so it can run after every step. A violation is reported when it is
// introduced (or when its job is touched again), not on every later call.
func (m *ExecutionModel) CheckInvariants() []protocol.Violation {
	c := &m.chk
	c.out = nil
	m.checkJournal()
	m.checkTokens()
	for _, j := range c.pruned {
		c.checkPruned(j)
	}
	c.pruned = c.pruned[:0]
	// checkJob touches devices and buyers, whose checks need every job's
	// tally moved first; jobs are never touched by the checks.
	for _, j := range c.dirtyJobs {
		j.chk.dirty = false
		if !j.pruned {
			m.checkJob(j)
		}
	}
	c.dirtyJobs = c.dirtyJobs[:0]
	for _, d := range c.dirtyDevices {
		d.dirty = false
		if d.occupied != d.chkLive {
			c.fail(9, "device %s occupies %d slots but has %d live attempts", d.id, d.occupied, d.chkLive)
		}
	}
	c.dirtyDevices = c.dirtyDevices[:0]
	for _, b := range c.dirtyBuyers {
		b.dirty = false
		c.checkBuyer(b)
	}
	c.dirtyBuyers = c.dirtyBuyers[:0]
	out := c.out
	c.out = nil
	return out
}

// checkJournal replays the rows appended since the last check (invariant 4):
// each (from, to) must be in the tables, or an insert (From "") into the
// initial status of a row not seen before, and From must be the status the
// replay had reached. The replayed statuses are compared to the rows by
// checkJob.
func (m *ExecutionModel) checkJournal() {
	c := &m.chk
	for ; c.journalSeen < len(m.journal); c.journalSeen++ {
		e := &m.journal[c.journalSeen]
		j := m.jobs[e.JobID]
		if j == nil {
			c.fail(4, "journal row %d names unknown job %s", c.journalSeen, e.JobID)
			continue
		}
		m.touch(j)
		switch e.Kind {
		case kindJob:
			m.replayJob(c.journalSeen, e, j)
		case kindAttempt:
			m.replayAttempt(c.journalSeen, e, j)
		default:
			c.fail(4, "journal row %d of job %s has kind %q", c.journalSeen, e.JobID, e.Kind)
		}
	}
}

func (m *ExecutionModel) replayJob(i int, e *protocol.EventRow, j *job) {
	c := &m.chk
	from, to := protocol.JobStatus(e.From), protocol.JobStatus(e.To)
	switch {
	case e.AttemptID != "":
		c.fail(4, "journal row %d: job row of job %s names attempt %s", i, j.row.ID, e.AttemptID)
	case from == "" && (j.chk.replayed != "" || to != protocol.JobQueued):
		c.fail(4, "journal row %d: job %s inserted as %s after replaying to %q", i, j.row.ID, to, j.chk.replayed)
	case from != "" && protocol.AssertJobTransition(from, to) != nil:
		c.fail(4, "journal row %d: job %s %s -> %s is not in the table", i, j.row.ID, from, to)
	case from != "" && from != j.chk.replayed:
		c.fail(4, "journal row %d: job %s leaves %s but the journal had it %s", i, j.row.ID, from, j.chk.replayed)
	}
	j.chk.replayed = to
	if to == protocol.JobSucceeded {
		j.chk.succeededFrom = from
	}
}

func (m *ExecutionModel) replayAttempt(i int, e *protocol.EventRow, j *job) {
	c := &m.chk
	a := m.attempts[e.AttemptID]
	if a == nil || a.job != j {
		c.fail(4, "journal row %d names attempt %s, not an attempt of job %s", i, e.AttemptID, e.JobID)
		return
	}
	from, to := protocol.AttemptStatus(e.From), protocol.AttemptStatus(e.To)
	switch {
	case from == "" && (a.chkReplayed != "" || to != protocol.AttemptLeased):
		c.fail(4, "journal row %d: attempt %s inserted as %s after replaying to %q", i, a.row.ID, to, a.chkReplayed)
	case from != "" && protocol.AssertAttemptTransition(from, to) != nil:
		c.fail(4, "journal row %d: attempt %s %s -> %s is not in the table", i, a.row.ID, from, to)
	case from != "" && from != a.chkReplayed:
		c.fail(4, "journal row %d: attempt %s leaves %s but the journal had it %s", i, a.row.ID, from, a.chkReplayed)
	}
	a.chkReplayed = to
}

// checkTokens is invariant 6 for the attempts inserted and tokens offered
// since the last check: each stored hash is 64 lowercase hex, no two
// attempts share one, and no hash equals any plaintext ever offered (in
// either order of appearance).
func (m *ExecutionModel) checkTokens() {
	c := &m.chk
	for ; c.attemptsSeen < len(m.attemptLog); c.attemptsSeen++ {
		a := m.attemptLog[c.attemptsSeen]
		h := a.row.TokenHash
		if !protocol.ValidTokenHash(h) {
			c.fail(6, "attempt %s of job %s stores token hash %q, not 64 lowercase hex", a.row.ID, a.row.JobID, h)
		}
		if other, dup := c.hashes[h]; dup {
			c.fail(6, "attempt %s of job %s stores the token hash of attempt %s", a.row.ID, a.row.JobID, other)
		} else {
			c.hashes[h] = a.row.ID
		}
		if _, leak := c.plaintexts[h]; leak {
			c.fail(6, "attempt %s of job %s stores a plaintext token as its hash", a.row.ID, a.row.JobID)
		}
	}
	for _, p := range c.pending {
		if id, leak := c.hashes[p]; leak {
			c.fail(6, "an offered plaintext token equals the stored hash of attempt %s", id)
		}
	}
	c.pending = c.pending[:0]
}
