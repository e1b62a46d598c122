package fleet

import (
	"fmt"
	"io"
	"time"

	"github.com/olekukonko/tablewriter"

	"github.com/rendermac/rendermac/harness/soak"
)

// Report is what a fleet run did and found.
type Report struct {
	Seed           uint64
	Duration, Wall time.Duration
	// LoadTime is how long load and faults ran: Duration, or longer when
	// the first round of fault kinds took longer.
	LoadTime         time.Duration
	Agents, Gateways int
	Rate             float64
	Variant          string
	TmpfsDisks       bool
	FFmpeg           bool
	// Store is the gateways' artifact store (StoreFS or StoreS3);
	// StoreNote says why StoreAuto fell back to the filesystem.
	Store, StoreNote string
	// Postgres is the gateways' database (PostgresLocal, PostgresPatroni)
	// and PGVariant its broken variant, if any; PrimaryLosses are the
	// primaries a Patroni run killed or switched over, each with its
	// outage.
	Postgres, PGVariant string
	PrimaryLosses       []PrimaryLoss
	// Dir is the kept run directory with every process's log ("" when
	// it was removed).
	Dir string
	// Began is when load began (PrimaryLoss times are shown from it).
	Began time.Time
	// Transport says how the agents reach the gateways (Transport).
	Transport         string
	Faults            map[string]int
	Submitted         int64
	Accepted, Refused int64
	Cancels           int64
	// Drained says every job ended and every webhook was delivered;
	// DrainTime is how long that took after the last fault healed.
	Drained    bool
	DrainTime  time.Duration
	DrainBound time.Duration
	// Wasted is, per agent index, the seconds it kept working on attempts
	// after the journal says their lease was lost.
	Wasted map[int]time.Duration
	// FailureCodes counts failed attempts by code.
	FailureCodes map[string]int
	// Soak holds the soak's checks and tallies (outcomes, holds, webhooks).
	Soak soak.Report
	// Checks are the fleet's own.
	Checks []soak.Check
}

// NotInjected says why this run could not inject kind ("" when it could).
func (r *Report) NotInjected(kind string) string {
	switch {
	case kind == FaultDiskFull && !r.TmpfsDisks:
		return "not injected (no tmpfs: mount refused)"
	case kind == FaultStoreOutage && r.Store != StoreS3:
		return "not injected (filesystem store)"
	case kind == FaultPostgresKill && r.Postgres == PostgresPatroni:
		return "not injected (Patroni cluster: primary kills instead)"
	case (kind == FaultPrimaryKill || kind == FaultSwitchover) && r.Postgres != PostgresPatroni:
		return "not injected (one local Postgres; --postgres patroni)"
	}
	return ""
}

// AllChecks is the soak's checks, then the fleet's.
func (r *Report) AllChecks() []soak.Check {
	return append(append([]soak.Check(nil), r.Soak.Checks...), r.Checks...)
}

// Violations counts what every check found.
func (r *Report) Violations() int {
	n := 0
	for _, c := range r.AllChecks() {
		n += len(c.Violations)
	}
	return n
}

// WastedTotal sums the wasted work over the agents.
func (r *Report) WastedTotal() time.Duration {
	var t time.Duration
	for _, d := range r.Wasted {
		t += d
	}
	return t
}

// PrintTable writes faults, load, wasted work and checks as tables, then
// every violation.
func (r *Report) PrintTable(w io.Writer) error {
	v := ""
	if r.Variant != "" {
		v = ", agent variant " + r.Variant
	}
	fmt.Fprintf(w, "fleet: seed %d, %s of load (asked %s; %s wall), %d gateways, %d agents, %.1f jobs/s, %s store%s\n",
		r.Seed, r.LoadTime.Round(time.Second), r.Duration, r.Wall.Round(time.Second), r.Gateways, r.Agents, r.Rate, r.Store, v)
	if r.StoreNote != "" {
		fmt.Fprintf(w, "fleet: %s\n", r.StoreNote)
	}
	fmt.Fprintf(w, "fleet: postgres %s\n", r.PostgresLabel())
	if r.Transport != "" {
		fmt.Fprintf(w, "fleet: transport %s\n", r.Transport)
	}
	f := tablewriter.NewWriter(w)
	f.Header("fault injected", "count")
	total := 0
	for _, k := range FaultKinds() {
		n := any(r.Faults[k])
		if why := r.NotInjected(k); why != "" {
			n = why
		}
		_ = f.Append(k, n)
		total += r.Faults[k]
	}
	_ = f.Append("total", total)
	if err := f.Render(); err != nil {
		return err
	}
	l := tablewriter.NewWriter(w)
	l.Header("load", "count")
	for _, row := range []struct {
		k string
		v any
	}{
		{"jobs submitted / accepted / refused", fmt.Sprintf("%d / %d / %d", r.Submitted, r.Accepted, r.Refused)},
		{"cancels accepted", r.Cancels},
		{"jobs succeeded / cancelled / failed", fmt.Sprintf("%d / %d / %d", r.Soak.Succeeded, r.Soak.Cancelled, r.Soak.Failed)},
		{"failed attempts by code", fmt.Sprint(r.FailureCodes)},
		{"FFmpeg renders in the mix", r.FFmpeg},
		{"webhooks delivered / pending retry", fmt.Sprintf("%d / %d", r.Soak.WebhookDelivered, r.Soak.WebhookPending)},
		{"drain time after the last heal", r.DrainTime.Round(time.Millisecond)},
		{"wasted work (all agents)", r.WastedTotal().Round(time.Millisecond)},
	} {
		_ = l.Append(row.k, row.v)
	}
	if err := l.Render(); err != nil {
		return err
	}
	ww := tablewriter.NewWriter(w)
	ww.Header("agent", "wasted work (s after its lease was lost)")
	for i := range r.Agents {
		_ = ww.Append(fmt.Sprintf("agent-%d", i), fmt.Sprintf("%.2f", r.Wasted[i].Seconds()))
	}
	if err := ww.Render(); err != nil {
		return err
	}
	if err := r.printLosses(w); err != nil {
		return err
	}
	c := tablewriter.NewWriter(w)
	c.Header("check", "over", "violations", "result")
	for _, ch := range r.AllChecks() {
		res := "ok"
		if len(ch.Violations) > 0 {
			res = "FAIL"
		}
		_ = c.Append(ch.Name, ch.Examined, len(ch.Violations), res)
	}
	if err := c.Render(); err != nil {
		return err
	}
	for _, ch := range r.AllChecks() {
		for _, v := range ch.Violations {
			fmt.Fprintf(w, "VIOLATION %s: %s\n", ch.Name, v)
		}
	}
	return nil
}

// PostgresLabel says which Postgres the run had, in words.
func (r *Report) PostgresLabel() string {
	switch {
	case r.Postgres != PostgresPatroni:
		return "one local cluster (crashed and restarted in place)"
	case r.PGVariant == PGVariantAsyncHoldback:
		return "Patroni, 3 nodes, ASYNCHRONOUS replication, standbys' WAL held back before each primary kill (broken on purpose: must fail)"
	}
	return "Patroni, 3 nodes, synchronous_mode (multi-host URL, target_session_attrs=read-write)"
}

// printLosses writes one row per primary loss: when, from and to which
// node, and the outage to the first committed job after it.
func (r *Report) printLosses(w io.Writer) error {
	if len(r.PrimaryLosses) == 0 {
		return nil
	}
	t := tablewriter.NewWriter(w)
	t.Header("primary loss", "at (load time)", "from -> to", "WAL held back / success visible", "failover outage (to first committed job)")
	for _, l := range r.PrimaryLosses {
		held := "-"
		if l.HeldBack {
			held = fmt.Sprintf("yes / %v", l.Visible)
		}
		out := "no job committed after it"
		if !l.FirstCommit.IsZero() {
			out = l.Outage().Round(time.Millisecond).String()
		}
		kind := "primary killed"
		if l.Kind == FaultSwitchover {
			kind = "switchover"
		}
		_ = t.Append(kind, l.At.Sub(r.Began).Round(time.Millisecond).String(), l.From+" -> "+l.To, held, out)
	}
	return t.Render()
}

// MaxOutage is the longest failover outage of the run (0: none).
func (r *Report) MaxOutage() time.Duration {
	var m time.Duration
	for _, l := range r.PrimaryLosses {
		m = max(m, l.Outage())
	}
	return m
}
