package gateway

import "sync/atomic"

// Wakeups counts, over every session of a gateway, each time a session's
// own code was woken, by cause. An idle session (welcomed, nothing to
// lease, no frames) must add nothing but Pings, its heartbeat.
type Wakeups struct {
	// Frames is data frames read: the reader woke for one.
	Frames int64 `json:"frames"`
	// Offers is offer passes: the session was woken to lease into its
	// free slots.
	Offers int64 `json:"offers"`
	// Notices is cancel and lost-attempt notices written to a session.
	Notices int64 `json:"notices"`
	// Pings is heartbeat timer fires (a ping sent, or skipped before
	// welcome).
	Pings int64 `json:"pings"`
}

// Idle is every wake-up but the heartbeat's.
func (w Wakeups) Idle() int64 { return w.Frames + w.Offers + w.Notices }

// Sub is w minus an earlier reading.
func (w Wakeups) Sub(o Wakeups) Wakeups {
	return Wakeups{Frames: w.Frames - o.Frames, Offers: w.Offers - o.Offers, Notices: w.Notices - o.Notices,
		Pings: w.Pings - o.Pings}
}

type wakeCounters struct{ frames, offers, notices, pings atomic.Int64 }

// Wakeups reads the gateway's wake-up counters.
func (g *Gateway) Wakeups() Wakeups {
	c := &g.wakes
	return Wakeups{Frames: c.frames.Load(), Offers: c.offers.Load(), Notices: c.notices.Load(), Pings: c.pings.Load()}
}
