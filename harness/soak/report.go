package soak

import (
	"fmt"
	"io"
	"time"

	"github.com/olekukonko/tablewriter"
)

// Report is what a soak did and found.
type Report struct {
	Seed     uint64
	Duration time.Duration
	Agents   int
	Rate     float64
	Wall     time.Duration
	Stats    Stats
	// Faults counts the faults injected by kind (FaultKinds order).
	Faults map[string]int
	// Drained says every job ended and every webhook was delivered
	// within the drain bound.
	Drained bool
	// Jobs by outcome at the end.
	Jobs, Succeeded, Cancelled, Failed int
	// Webhook deliveries: acknowledged, still pending retry (recorded,
	// not lost), re-deliveries of acknowledged ones (at least once), and
	// 503s of the outage fault.
	WebhookDelivered, WebhookPending, WebhookDuplicates, WebhookRefused int
	// Holds by status at the end (held: not settled).
	HoldsCaptured, HoldsReleased, HoldsHeld int
	Checks                                  []Check
}

// Violations counts what every check found.
func (r *Report) Violations() int {
	n := 0
	for _, c := range r.Checks {
		n += len(c.Violations)
	}
	return n
}

// PrintTable writes the faults and the checks as tables, then every
// violation found.
func (r *Report) PrintTable(w io.Writer) error {
	fmt.Fprintf(w, "soak: seed %d, %s of load (%s wall), %d agents, %.1f jobs/s\n", r.Seed, r.Duration, r.Wall.Round(time.Second), r.Agents, r.Rate)
	f := tablewriter.NewWriter(w)
	f.Header("fault injected", "count")
	total := 0
	for _, k := range FaultKinds() {
		_ = f.Append(k, r.Faults[k])
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
		{"jobs submitted", r.Stats.Submitted}, {"jobs accepted (201)", r.Stats.Accepted},
		{"submissions refused or cut", r.Stats.Refused}, {"cancels accepted", r.Stats.Cancels},
		{"agent commit_ok", r.Stats.Commits}, {"agent fails (retryable)", r.Stats.Fails},
		{"jobs succeeded / cancelled / failed", fmt.Sprintf("%d / %d / %d", r.Succeeded, r.Cancelled, r.Failed)},
		{"holds captured / released / still held", fmt.Sprintf("%d / %d / %d", r.HoldsCaptured, r.HoldsReleased, r.HoldsHeld)},
		{"webhooks delivered / pending retry", fmt.Sprintf("%d / %d", r.WebhookDelivered, r.WebhookPending)},
		{"webhook re-deliveries / 503s", fmt.Sprintf("%d / %d", r.WebhookDuplicates, r.WebhookRefused)},
		{"drained (no live job, no pending webhook)", r.Drained},
	} {
		_ = l.Append(row.k, row.v)
	}
	if err := l.Render(); err != nil {
		return err
	}
	c := tablewriter.NewWriter(w)
	c.Header("check", "over", "violations", "result")
	for _, ch := range r.Checks {
		res := "ok"
		if len(ch.Violations) > 0 {
			res = "FAIL"
		}
		_ = c.Append(ch.Name, ch.Examined, len(ch.Violations), res)
	}
	if err := c.Render(); err != nil {
		return err
	}
	for _, ch := range r.Checks {
		for _, v := range ch.Violations {
			fmt.Fprintf(w, "VIOLATION %s: %s\n", ch.Name, v)
		}
	}
	return nil
}
