package fuzz

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/rendermac/rendermac/protocol"
)

// A boundary tick moves the clock onto an instant the state compares now
// with, or one microsecond either side, rather than a random number of
// milliseconds past it: every rule that reads `expires <= now` or
// `now < deadline` is exercised at the one instant where the two differ.
// It is resolved at apply time against the reference target's rows (whose
// state every other target's equals), like job indexes, so that a shrunk
// sequence still aims at a boundary.

// boundaryInstants lists the instants of kind b in snap that lie after now
// (with the offset applied), in time order.
func boundaryInstants(snap protocol.Snapshot, b Boundary, offset time.Duration, now time.Time) []time.Time {
	var out []time.Time
	add := func(t time.Time) {
		if t = t.Add(offset); !t.IsZero() && t.After(now) {
			out = append(out, t)
		}
	}
	switch b {
	case BoundaryLease:
		for _, a := range snap.Attempts {
			if a.Status.Live() {
				add(a.LeaseExpiresAt)
			}
		}
	case BoundaryDeadline:
		for _, j := range snap.Jobs {
			if !j.Status.Terminal() {
				add(j.AdmissionDeadline)
			}
		}
	case BoundaryHeartbeat:
		for _, d := range snap.Devices {
			if d.Status == protocol.DeviceOnline && !d.LastSeenAt.IsZero() {
				add(d.LastSeenAt.Add(WorldHeartbeatWindow))
			}
		}
	}
	slices.SortFunc(out, func(x, y time.Time) int { return x.Compare(y) })
	return out
}

// BoundaryFault is the coverage key of a boundary tick that landed:
// "tick_on_lease_expiry", "tick_on_lease_expiry-1us", "tick_on_heartbeat+1us".
func BoundaryFault(b Boundary, offsetUs int) string {
	k := "tick_on_" + b.String()
	if offsetUs != 0 {
		k += fmt.Sprintf("%+dus", offsetUs)
	}
	return k
}

// boundaryFaults lists every BoundaryFault key, for the required coverage.
func boundaryFaults() []string {
	var out []string
	for b := range boundaryCount {
		for off := -1; off <= 1; off++ {
			out = append(out, BoundaryFault(b, off))
		}
	}
	return out
}

// resolveBoundary returns the advance a boundary tick takes from now and
// its coverage key ("" when the state had no such instant after now and
// the tick fell back to ev.Advance).
func (r *runner) resolveBoundary(ctx context.Context, ev Event) (time.Duration, string, error) {
	snap, err := r.targets[0].Snapshot(ctx)
	if err != nil {
		return 0, "", fmt.Errorf("boundary tick: snapshot of %s: %w", r.targets[0].Name(), err)
	}
	at := boundaryInstants(snap, ev.At, time.Duration(ev.OffsetUs)*time.Microsecond, r.v.now)
	if len(at) == 0 {
		return ev.Advance, "", nil
	}
	return at[((ev.Job%len(at))+len(at))%len(at)].Sub(r.v.now), BoundaryFault(ev.At, ev.OffsetUs), nil
}
