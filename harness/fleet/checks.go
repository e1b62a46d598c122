package fleet

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/rendermac/rendermac/harness/soak"
)

// logLine is what the checks read of an agent's JSON log line.
type logLine struct {
	Time      time.Time `json:"time"`
	Msg       string    `json:"msg"`
	Type      string    `json:"type"`
	AttemptID string    `json:"attempt_id"`
	Code      string    `json:"code"`
}

// agentLog is one agent's log, reduced to what the checks need.
type agentLog struct {
	idx int
	// commitOK are the attempts the agent heard commit_ok for.
	commitOK []string
	// conflictAt is when a lease_conflict ended each attempt; committedAt
	// when the agent sent a commit for it (the last one).
	conflictAt, committedAt map[string]time.Time
	// workEnd is when each attempt's pipeline ended (the line runAttempt
	// logs once, whatever the outcome): its work's end.
	workEnd map[string]time.Time
	// commitConflicts are attempts whose commit was refused commit_conflict.
	commitConflicts []string
}

func readAgentLog(idx int, path string) (*agentLog, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	l := &agentLog{idx: idx, conflictAt: map[string]time.Time{}, committedAt: map[string]time.Time{}, workEnd: map[string]time.Time{}}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var ln logLine
		if json.Unmarshal(sc.Bytes(), &ln) != nil || ln.AttemptID == "" {
			continue
		}
		switch ln.Msg {
		case "attempt stopped without a final frame", "output uploaded; committing", "attempt failed":
			l.workEnd[ln.AttemptID] = ln.Time
		}
		switch {
		case ln.Msg == "attempt over" && ln.Type == "commit_ok":
			l.commitOK = append(l.commitOK, ln.AttemptID)
		case strings.HasPrefix(ln.Msg, "lease_conflict: attempt gone"):
			if _, seen := l.conflictAt[ln.AttemptID]; !seen {
				l.conflictAt[ln.AttemptID] = ln.Time
			}
		case ln.Msg == "sent" && ln.Type == "commit":
			l.committedAt[ln.AttemptID] = ln.Time
		case strings.HasPrefix(ln.Msg, "attempt over: final frame rejected") && ln.Code == "commit_conflict":
			l.commitConflicts = append(l.commitConflicts, ln.AttemptID)
		}
	}
	return l, sc.Err()
}

// check runs the fleet's own checks into rep.
func (r *run) check(ctx context.Context, rep *Report) error {
	var logs []*agentLog
	for _, a := range r.agents {
		l, err := readAgentLog(a.idx, a.log)
		if err != nil {
			return fmt.Errorf("agent %d log: %w", a.idx, err)
		}
		logs = append(logs, l)
	}
	// The journal's view of every attempt: its final status, failure code
	// and when it was lost (if it was).
	type attemptRow struct {
		status, code string
		lostAt       *time.Time
		// job is the attempt's job's status; jobWinner its succeeded attempt.
		job, jobWinner string
	}
	attempts := map[string]attemptRow{}
	rows, err := r.obs.Query(ctx, `SELECT a.id::text, a.status, coalesce(a.failure_code, ''),
	        (SELECT min(e.at) FROM job_events e WHERE e.attempt_id = a.id AND e.to_status = 'lost'),
	        j.status, coalesce(j.succeeded_attempt_id::text, '')
	    FROM job_attempts a JOIN jobs j ON j.id = a.job_id`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var id string
		var row attemptRow
		if err := rows.Scan(&id, &row.status, &row.code, &row.lostAt, &row.job, &row.jobWinner); err != nil {
			rows.Close()
			return err
		}
		attempts[id] = row
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}

	commitOK := soak.Check{ID: "commit-ok-live", Name: "every commit_ok an agent heard is a succeeded attempt of a succeeded job, its output stored " +
		"(size and hash: the outputs check); none for an attempt lost or cancelled"}
	afterConflict := soak.Check{ID: "no-commit-after-conflict", Name: "no commit sent after a lease_conflict ended the attempt (agent logs)"}
	ownToken := soak.Check{ID: "own-token", Name: "no commit refused commit_conflict: each agent sends its own attempt's token"}
	retryable := soak.Check{ID: "retryable-only", Name: "no attempt failed with a non-retryable code (the mix has no bad job)"}
	var oks, conflicts, commits int
	rep.Wasted = map[int]time.Duration{}
	for _, l := range logs {
		oks += len(l.commitOK)
		for _, id := range l.commitOK {
			a, ok := attempts[id]
			switch {
			case !ok:
				commitOK.Add("agent %d got commit_ok for attempt %s, which the database does not hold: an acknowledged commit was lost",
					l.idx, id)
			case a.status != "succeeded" || a.job != "succeeded" || a.jobWinner != id:
				commitOK.Add("agent %d got commit_ok for attempt %s, which the journal has as %s (its job %s, succeeded by %q)",
					l.idx, id, a.status, a.job, a.jobWinner)
			}
		}
		conflicts += len(l.conflictAt)
		commits += len(l.committedAt)
		for id, at := range l.conflictAt {
			if sent, ok := l.committedAt[id]; ok && sent.After(at) {
				afterConflict.Add("agent %d sent a commit for attempt %s %s after a lease_conflict ended it",
					l.idx, id, sent.Sub(at).Round(time.Millisecond))
			}
		}
		for _, id := range l.commitConflicts {
			ownToken.Add("agent %d: commit for attempt %s refused commit_conflict (a token or epoch not its own)", l.idx, id)
		}
		for id, last := range l.workEnd {
			if a, ok := attempts[id]; ok && a.lostAt != nil && last.After(*a.lostAt) {
				rep.Wasted[l.idx] += last.Sub(*a.lostAt)
			}
		}
	}
	commitOK.Examined = fmt.Sprintf("%d commit_ok heard by agents, %d attempts", oks, len(attempts))
	afterConflict.Examined = fmt.Sprintf("%d attempts ended by lease_conflict, %d with a commit sent", conflicts, commits)
	ownToken.Examined = fmt.Sprintf("%d agents' logs", len(logs))
	codes := map[string]int{}
	for id, a := range attempts {
		if a.code == "" {
			continue
		}
		codes[a.code]++
		switch a.code {
		case "runner_failed", "verification_failed", "commit_conflict":
			retryable.Add("attempt %s failed with %s", id, a.code)
		}
	}
	rep.FailureCodes = codes
	retryable.Examined = fmt.Sprintf("%d attempts", len(attempts))
	refusedOut, failedJobs, err := r.checkRefusedOut(ctx)
	if err != nil {
		return err
	}
	refusedOut.Examined = fmt.Sprintf("%d failed jobs", failedJobs)

	wifi := soak.Check{ID: "reconnect-bound", Name: fmt.Sprintf("every Wi-Fi loss: the agent reconnected within %s of the heal", ReconnectBound()),
		Examined: fmt.Sprintf("%d Wi-Fi losses", rep.Faults[FaultWiFiLoss])}
	r.mu.Lock()
	for _, v := range r.violations {
		wifi.Add("%s", v)
	}
	r.mu.Unlock()
	drain := soak.Check{ID: "drain-bound", Name: fmt.Sprintf("the queue drained within %s of the last heal", rep.DrainBound),
		Examined: fmt.Sprintf("drained in %s", rep.DrainTime.Round(time.Millisecond))}
	if !rep.Drained || rep.DrainTime > rep.DrainBound {
		drain.Add("drained %v after %s (bound %s)", rep.Drained, rep.DrainTime.Round(time.Millisecond), rep.DrainBound)
	}
	kinds := soak.Check{ID: "fault-kinds", Name: "every fault kind was injected", Examined: fmt.Sprintf("%d faults", rep.Soak.Stats.Faults)}
	for _, k := range FaultKinds() {
		if rep.Faults[k] == 0 && r.injectable(k) {
			kinds.Add("no %s: run longer or with a shorter --fault-every", k)
		}
	}
	hooks, err := r.checkTerminalWebhooks(ctx)
	if err != nil {
		return err
	}
	journal, err := r.checkJournalChains(ctx)
	if err != nil {
		return err
	}
	rep.Checks = append(rep.Checks, commitOK, afterConflict, ownToken, retryable, refusedOut, hooks, journal, wifi, drain, kinds)
	return nil
}

// CheckIDs are the IDs of every check a fleet run reports (the soak's
// and its own), as the rule trace names them (fleet:ID).
func CheckIDs() []string {
	return []string{"invariants", "accepted-terminal", "one-terminal", "holds", "outputs", "webhooks", "exercised",
		"commit-ok-live", "no-commit-after-conflict", "own-token", "retryable-only", "no-capacity-spent", "reconnect-bound",
		"drain-bound", "fault-kinds", "webhook-terminal", "journal-chain"}
}

// refusalsSpent is how many no_capacity refusals by one device of one
// failed job make a violation: a device on a full disk must not be handed
// the job it refused back until it reports room (docs/SPEC.md section 5),
// and three disk faults on one device within one job's life do not happen
// in a fleet run.
const refusalsSpent = 3

// checkRefusedOut finds failed jobs whose attempts one device spent by
// refusing them no_capacity again and again; it returns the check and the
// number of failed jobs.
func (r *run) checkRefusedOut(ctx context.Context) (soak.Check, int, error) {
	c := soak.Check{ID: "no-capacity-spent", Name: fmt.Sprintf("no failed job had %d or more attempts refused no_capacity by one device", refusalsSpent)}
	var failed int
	if err := r.obs.QueryRow(ctx, `SELECT count(*) FROM jobs WHERE status = 'failed'`).Scan(&failed); err != nil {
		return c, 0, err
	}
	rows, err := r.obs.Query(ctx, `SELECT a.job_id::text, a.device_id::text, count(*)
	    FROM job_attempts a JOIN jobs j ON j.id = a.job_id
	    WHERE j.status = 'failed' AND a.failure_code = 'no_capacity'
	    GROUP BY a.job_id, a.device_id HAVING count(*) >= $1 ORDER BY 1, 2`, refusalsSpent)
	if err != nil {
		return c, 0, err
	}
	defer rows.Close()
	for rows.Next() {
		var job, device string
		var n int
		if err := rows.Scan(&job, &device, &n); err != nil {
			return c, 0, err
		}
		c.Add("job %s failed after device %s refused %d of its attempts no_capacity (offered back without a slots report)", job, device, n)
	}
	return c, failed, rows.Err()
}
