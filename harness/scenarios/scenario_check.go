package scenarios

import (
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/store"
)

// cmdJob checks a job's row, its attempts' statuses in number order (none
// for no attempt), its hold, its webhook outbox rows and failure code.
// Example: job j1 verifying attempts=committing hold=held webhooks=0
func cmdJob(r *scRun, st scStep) error {
	_, err := r.checkJob(st)
	return err
}

// cmdFinal is `job` for the end state the scenario exists to produce; what
// it observed becomes the Result's Observed.
// Example: final j1 cancelled attempts=cancelled hold=released webhooks=1
func cmdFinal(r *scRun, st scStep) error {
	seen, err := r.checkJob(st)
	if seen != "" {
		r.mu.Lock()
		r.finals = append(r.finals, seen)
		r.mu.Unlock()
	}
	return err
}

func (r *scRun) checkJob(st scStep) (string, error) {
	id, err := r.jobID(arg(st, 0))
	if err != nil {
		return "", err
	}
	snap, err := store.Snapshot(r.ctx, r.observer)
	if err != nil {
		return "", err
	}
	var job *protocol.JobRow
	for i := range snap.Jobs {
		if snap.Jobs[i].ID == id {
			job = &snap.Jobs[i]
		}
	}
	if job == nil {
		return "", fmt.Errorf("job %s has no row", arg(st, 0))
	}
	var attempts []string
	for _, a := range snap.Attempts {
		if a.JobID == id {
			attempts = append(attempts, string(a.Status))
		}
	}
	got := map[string]string{"status": string(job.Status), "attempts": strings.Join(attempts, ","),
		"hold": string(job.HoldStatus), "webhooks": strconv.Itoa(job.Webhooks), "failure": string(job.FailureCode),
		"count": strconv.Itoa(job.AttemptCount)}
	if got["attempts"] == "" {
		got["attempts"] = "none"
	}
	if got["failure"] == "" {
		got["failure"] = "none"
	}
	want := map[string]string{"status": arg(st, 1)}
	seen := []string{arg(st, 0), got["status"]}
	for _, k := range []string{"attempts", "hold", "webhooks", "failure", "count"} {
		if v, ok := st.kv[k]; ok {
			want[k] = v
			seen = append(seen, k+"="+got[k])
		}
	}
	rendered := strings.Join(seen, " ")
	r.tl.add(laneDatabase, "row check: "+rendered)
	for k, v := range want {
		if got[k] != v {
			return rendered, fmt.Errorf("job %s: want %s=%s, got %s", arg(st, 0), k, v, rendered)
		}
	}
	return rendered, nil
}

// cmdBuyer checks the buyer's money: balance, open holds, captures.
// Example: buyer balance=99990 held=0 captured=10
func cmdBuyer(r *scRun, st scStep) error {
	snap, err := store.Snapshot(r.ctx, r.observer)
	if err != nil {
		return err
	}
	for _, b := range snap.Buyers {
		if b.ID != scBuyerID {
			continue
		}
		got := map[string]int64{"balance": b.BalanceCents, "held": b.HeldCents, "captured": b.CapturedCents}
		rendered := fmt.Sprintf("buyer balance=%d held=%d captured=%d", b.BalanceCents, b.HeldCents, b.CapturedCents)
		r.tl.add(laneDatabase, "row check: "+rendered)
		for k, v := range st.kv {
			n, err := strconv.ParseInt(v, 10, 64)
			if _, known := got[k]; !known || err != nil {
				return fmt.Errorf("bad expectation %s=%s", k, v)
			}
			if got[k] != n {
				return fmt.Errorf("want %s=%d, got %s", k, n, rendered)
			}
		}
		return nil
	}
	return fmt.Errorf("no buyer row")
}

// cmdTokens checks a job's commit token hashes (SPEC section 1): one per
// attempt, 64 lowercase hex, all distinct, each the hash of the token its
// offer carried and never that token itself.
// Example: tokens j1 distinct
func cmdTokens(r *scRun, st scStep) error {
	id, err := r.jobID(arg(st, 0))
	if err != nil {
		return err
	}
	snap, err := store.Snapshot(r.ctx, r.observer)
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	n := 0
	for _, a := range snap.Attempts {
		if a.JobID != id {
			continue
		}
		n++
		if !protocol.ValidTokenHash(a.TokenHash) || seen[a.TokenHash] {
			return fmt.Errorf("attempt %s: token hash %q is malformed or reused", r.name(a.ID), a.TokenHash)
		}
		seen[a.TokenHash] = true
		r.mu.Lock()
		o := r.offers[r.names[a.ID]]
		r.mu.Unlock()
		if o != nil && (protocol.HashCommitToken(o.CommitToken) != a.TokenHash || o.CommitToken == a.TokenHash) {
			return fmt.Errorf("attempt %s: stored hash is not the hash of the offered token", r.name(a.ID))
		}
	}
	if n < 2 {
		return fmt.Errorf("job %s has %d attempts; distinct tokens need at least 2", arg(st, 0), n)
	}
	r.tl.add(laneDatabase, fmt.Sprintf("row check: %s has %d attempts with distinct token hashes", arg(st, 0), n))
	return nil
}

// cmdReached is the mark that proves the scenario hit its branch:
//
//	reached journal J KIND FROM->TO [code=C] [actor=A]   a journal row exists
//	reached hit POINT [n=N]                               a fault point fired
//	reached log "MESSAGE" [gateway=G] [level=warn]        a gateway logged it
//	reached frame A TYPE [WORDS] [session=N]              the agent got that frame
//	reached counter NAME [n=N]                            a harness counter rose
//	reached wire A sent|got TYPE [WORDS] [session=N]      a shipped agent sent (got) that frame
//
// Example: reached journal j1 job verifying->cancelling actor=buyer
func cmdReached(r *scRun, st scStep) error {
	ok, what, err := r.mark(st)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("not reached: %s", what)
	}
	r.marksOK++
	r.tl.add(laneGateway, "reached: "+what)
	return nil
}

func (r *scRun) mark(st scStep) (bool, string, error) {
	n, err := optInt(st, "n", 1)
	if err != nil {
		return false, "", err
	}
	what := strings.Join(st.words, " ")
	switch arg(st, 0) {
	case "journal":
		ok, err := r.journalHas(st)
		return ok, what, err
	case "hit":
		return r.fpHits(arg(st, 1)) >= int64(n), fmt.Sprintf("%s (hit %d times)", what, r.fpHits(arg(st, 1))), nil
	case "log":
		level := slog.LevelInfo
		if st.opt("level", "") == "warn" {
			level = slog.LevelWarn
		}
		return r.logged(st.opt("gateway", ""), arg(st, 1), level), what, nil
	case "frame":
		a := r.agents[arg(st, 1)]
		if a == nil {
			return false, what, fmt.Errorf("no agent %s", arg(st, 1))
		}
		session, err := optInt(st, "session", 0)
		if err != nil {
			return false, what, err
		}
		for _, g := range a.got {
			if (session == 0 || g.session == session) && matchSpec([][]string{st.args[2:]}, g.typ, g.detail) == 0 {
				return true, what, nil
			}
		}
		return false, what, nil
	case "wire":
		ok, err := r.markWire(st)
		return ok, what, err
	case "counter":
		c := r.counter(arg(st, 1))
		return c >= int64(n), fmt.Sprintf("%s (counter %d)", what, c), nil
	}
	return false, what, fmt.Errorf("unknown mark %q", arg(st, 0))
}

// journalHas looks for `journal J KIND FROM->TO` in job_events.
func (r *scRun) journalHas(st scStep) (bool, error) {
	id, err := r.jobID(arg(st, 1))
	if err != nil {
		return false, err
	}
	from, to, ok := strings.Cut(arg(st, 3), "->")
	if !ok {
		return false, fmt.Errorf("want FROM->TO, got %q", arg(st, 3))
	}
	if from == "new" {
		from = ""
	}
	var n int
	err = r.observer.QueryRow(r.ctx, `
SELECT count(*) FROM job_events
WHERE job_id = $1 AND kind = $2 AND coalesce(from_status, '') = $3 AND to_status = $4
  AND ($5 = '' OR code = $5) AND ($6 = '' OR actor = $6)`,
		id, arg(st, 2), from, to, st.opt("code", ""), st.opt("actor", "")).Scan(&n)
	return n > 0, err
}

// cmdDevice checks an agent's device row: its status (online, offline,
// revoked) and, with seen=, when it was last heard from, as an offset from
// the scenario's start (the pinned clock's t0).
// Example: device a1 offline seen=0s
func cmdDevice(r *scRun, st scStep) error {
	a := r.agents[arg(st, 0)]
	if a == nil {
		return fmt.Errorf("no agent %q", arg(st, 0))
	}
	want := protocol.DeviceStatus(arg(st, 1))
	if !slices.Contains([]protocol.DeviceStatus{protocol.DeviceOnline, protocol.DeviceOffline, protocol.DeviceRevoked}, want) {
		return fmt.Errorf("want: device AGENT online|offline|revoked [seen=DURATION], got status %q", want)
	}
	var status protocol.DeviceStatus
	var seen *time.Time
	if err := r.observer.QueryRow(r.ctx, `SELECT status, last_seen_at FROM devices WHERE id = $1`, a.deviceID).
		Scan(&status, &seen); err != nil {
		return fmt.Errorf("read device %s: %w", a.name, err)
	}
	rendered := fmt.Sprintf("device %s %s seen=never", a.name, status)
	if seen != nil {
		rendered = fmt.Sprintf("device %s %s seen=%s", a.name, status, seen.Sub(scT0))
	}
	r.tl.add(laneDatabase, "row check: "+rendered)
	if status != want {
		return fmt.Errorf("want device %s %s, got %s", a.name, want, rendered)
	}
	if s, ok := st.kv["seen"]; ok {
		d, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("seen=%s: %w", s, err)
		}
		if seen == nil || !seen.Equal(scT0.Add(d)) {
			return fmt.Errorf("want device %s seen=%s, got %s", a.name, d, rendered)
		}
	}
	return nil
}
