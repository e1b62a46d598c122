package ratelimit

import (
	"time"

	"github.com/rendermac/rendermac/internal/clock"
)

// Defaults of Limits. Each is far above what an honest client does and
// what the harness does (scenarios, campaigns, the bench's 100 agents and
// 2,000 jobs from 16 buyers; the bench turns ConnectsPerIP off only, for
// its 1,100 sessions from one loopback address), and low enough that a flood costs
// the database a bounded number of lookups.
var (
	// DefaultPairPerIP: pairing is an operator typing a code.
	DefaultPairPerIP = Rule{N: 10, Per: time.Minute}
	// DefaultAuthFailuresPerIP: only unknown or revoked API keys count.
	DefaultAuthFailuresPerIP = Rule{N: 20, Per: time.Minute}
	// DefaultJobsPerBuyer: a burst of 200, then 20 per second.
	DefaultJobsPerBuyer = Rule{N: 200, Per: 10 * time.Second}
	// DefaultConnectsPerIP: a burst of 200 (a site's Macs reconnecting
	// after a gateway restart), then 20 per second.
	DefaultConnectsPerIP = Rule{N: 200, Per: 10 * time.Second}
	// DefaultConnectsPerDevice: an agent backs off exponentially, so ten
	// sessions a minute is a device in a crash loop.
	DefaultConnectsPerDevice = Rule{N: 10, Per: time.Minute}
)

// Limits are the control plane's abuse limits. Zero rules take the
// defaults; Off turns one off.
type Limits struct {
	// PairPerIP counts POST /v1/provider/pair requests per client IP.
	PairPerIP Rule
	// AuthFailuresPerIP counts buyer requests with an unknown or revoked
	// API key per client IP; once spent, every buyer request from that IP
	// is refused until it refills, so the limit bounds guessing.
	AuthFailuresPerIP Rule
	// JobsPerBuyer counts authenticated POST /v1/jobs requests per buyer.
	JobsPerBuyer Rule
	// ConnectsPerIP counts device WebSocket connection attempts per client
	// IP, authenticated or not, before the token is looked up.
	ConnectsPerIP Rule
	// ConnectsPerDevice counts authenticated device WebSocket connections
	// per device. A session takes exactly one hello, so this bounds the
	// device's hellos too.
	ConnectsPerDevice Rule
	// Clock judges the buckets; nil is the wall clock. Rate limiting is
	// about the rate requests arrive at, so it is not the pinned decision
	// clock of the harness.
	Clock clock.Clock
	// MaxKeys bounds the keys each limit remembers (0: DefaultMaxKeys).
	MaxKeys int
}

// Unlimited turns every limit off.
func Unlimited() Limits {
	return Limits{PairPerIP: Off, AuthFailuresPerIP: Off, JobsPerBuyer: Off, ConnectsPerIP: Off, ConnectsPerDevice: Off}
}

// WithDefaults fills the zero rules with the defaults.
func (l Limits) WithDefaults() Limits {
	def := func(r *Rule, d Rule) {
		if *r == (Rule{}) {
			*r = d
		}
	}
	def(&l.PairPerIP, DefaultPairPerIP)
	def(&l.AuthFailuresPerIP, DefaultAuthFailuresPerIP)
	def(&l.JobsPerBuyer, DefaultJobsPerBuyer)
	def(&l.ConnectsPerIP, DefaultConnectsPerIP)
	def(&l.ConnectsPerDevice, DefaultConnectsPerDevice)
	return l
}

// Keyed returns a limiter of rule on l's clock and key bound.
func (l Limits) Keyed(rule Rule) *Keyed { return New(rule, l.Clock, l.MaxKeys) }
