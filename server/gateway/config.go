package gateway

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rendermac/rendermac/internal/clock"
	"github.com/rendermac/rendermac/server/fencing"
	"github.com/rendermac/rendermac/server/grant"
	"github.com/rendermac/rendermac/server/ratelimit"
)

// Path is the device WebSocket endpoint of SPEC section 5.
const Path = "/v1/provider/ws"

// JobsChannel is the Postgres NOTIFY channel that says "a job became
// leasable"; the payload is the job's service name ("" means any). The
// service layer notifies on it when a job is created or requeued; the
// gateway LISTENs and wakes the sessions that offer the service, and the
// polling fallback covers notifications lost while the listener reconnects.
const JobsChannel = fencing.JobsChannel

// Defaults for the zero fields of Config.
const (
	DefaultGrantTTL       = time.Hour
	DefaultPollInterval   = 2 * time.Second
	DefaultSweepInterval  = time.Second
	DefaultMaxBadMessages = 5
)

// Variant names a deliberately broken gateway, to prove the scenario
// harness can fail (see fencing.Variant). The broken gateways exist only in
// a build with -tags mutations (mutation_on.go); production runs with
// VariantNone, the only one a default build has.
type Variant string

// VariantNone is the correct gateway.
const VariantNone Variant = ""

// Variants lists the broken gateways this build has (none without
// -tags mutations: variant_on.go, variant_off.go).
func Variants() []Variant { return variants.All() }

// CheckVariant reports whether m is VariantNone or one of Variants.
func CheckVariant(m Variant) error { return variants.Check(m) }

// Config tunes a Gateway. Zero fields take the defaults; PollInterval and
// SweepInterval may be negative to turn that loop off (the harness sweeps
// at instants of its own choosing).
type Config struct {
	// LeaseTTL is announced in welcome and is what offers' grant times are
	// derived from; it must equal the service layer's LeaseTTL
	// (default fencing.DefaultLeaseTTL).
	LeaseTTL time.Duration
	// Heartbeat is announced in welcome as the agent's renewal interval and
	// is the gateway's WebSocket ping interval (default LeaseTTL/3).
	Heartbeat time.Duration
	// TouchWindow bounds the gateway's own liveness writes (devices.last_seen_at
	// for frames whose decision does not heartbeat, and for pongs): a
	// session writes one at most once per TouchWindow, counting the
	// heartbeats its lease and accepted progress transactions made
	// (default Heartbeat). A connected device is then heartbeat at least
	// every TouchWindow + Heartbeat (its pongs), which must stay shorter
	// than the service layer's HeartbeatWindow so that the sweeper never
	// marks a live device offline; controlplane uses 2 x Heartbeat against
	// a window of 6 x Heartbeat.
	TouchWindow time.Duration
	// GrantTTL is the lifetime of the input and output grant URLs in an
	// offer. It outlives one lease on purpose: progress renews the lease,
	// but a large download or upload must not need a new grant.
	GrantTTL time.Duration
	// Grants issues the offers' grant URLs (nil: the gateway's signer, whose
	// URLs the control plane's artifact handler serves; artifact.S3 for
	// presigned URLs straight to the bucket).
	Grants grant.Issuer
	// PollInterval is the fallback scan for queued jobs, for whatever
	// LISTEN missed or nobody notified.
	PollInterval time.Duration
	// SweepInterval is how often the sweeper runs (in one gateway at a time).
	SweepInterval time.Duration
	// MaxBadMessages is how many bad_message frames a session gets before
	// it is closed with 1008.
	MaxBadMessages int
	// Clock makes the loops' and heartbeats' timers and measures touch
	// windows. A pinned clock (the harness's clock.Stub) also pins every
	// service call and heartbeat to its time; an unpinned one (nil is
	// clock.Real) leaves them to the database clock (a zero now).
	Clock clock.Clock
	// Variant selects a deliberately broken gateway (VariantNone in
	// production; see Variants).
	Variant Variant
	// Limits bound connection attempts per client IP (ConnectsPerIP) and
	// authenticated sessions per device (ConnectsPerDevice); the other
	// rules are the API's. Zero rules take the defaults.
	Limits ratelimit.Limits
	// ListenConn, when set, lends Run's listener the connection it LISTENs
	// on, for one subscription: release is called once the subscription
	// ends (the connection may then hold LISTENs and undelivered
	// notifications, or be closed), and the next subscribe calls ListenConn
	// again. Nil: every subscribe opens a connection on the pool's settings
	// and closes it. The harness sets it to keep one connection per worker
	// instead of starting a database backend for every run.
	ListenConn func(ctx context.Context) (conn *pgx.Conn, release func(), err error)
}

func (c Config) withDefaults() Config {
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
	if c.LeaseTTL <= 0 {
		c.LeaseTTL = fencing.DefaultLeaseTTL
	}
	if c.Heartbeat <= 0 {
		c.Heartbeat = c.LeaseTTL / 3
	}
	if c.TouchWindow <= 0 {
		c.TouchWindow = c.Heartbeat
	}
	if c.GrantTTL <= 0 {
		c.GrantTTL = DefaultGrantTTL
	}
	if c.PollInterval == 0 {
		c.PollInterval = DefaultPollInterval
	}
	if c.SweepInterval == 0 {
		c.SweepInterval = DefaultSweepInterval
	}
	if c.MaxBadMessages <= 0 {
		c.MaxBadMessages = DefaultMaxBadMessages
	}
	c.Limits = c.Limits.WithDefaults()
	return c
}

// Timeouts that are safety nets, not decisions, so they are not configurable.
const (
	// writeTimeout bounds one frame write; a peer that stops reading for
	// that long is gone (coder/websocket closes the connection).
	writeTimeout = 10 * time.Second
	// helloTimeout bounds the wait for hello after the upgrade.
	helloTimeout = 10 * time.Second
	// finalRetries bounds re-runs of a commit or fail whose service call
	// failed with an infrastructure error; both are idempotent.
	finalRetries = 3
	// retryBackoff is the first pause between those re-runs (doubling).
	retryBackoff = 50 * time.Millisecond
	// failoverWait is how long a commit or fail goes on being re-run
	// while the database is unavailable (fencing.Unavailable): longer than
	// a Patroni failover at its default ttl of 30 s. failoverBackoffMax
	// caps the pause between two re-runs then.
	failoverWait       = 45 * time.Second
	failoverBackoffMax = time.Second
	// maxWorkersPerSession bounds the frame workers of one session; the
	// reader waits beyond it, which is backpressure (and a reader that
	// waits answers no pings, so a flooding device is eventually cut). An
	// agent sends at most one final frame per held attempt (at most 64),
	// so an honest one never reaches the bound.
	maxWorkersPerSession = 128
	// listenBackoffMin and listenBackoffMax bound the listener's reconnects.
	listenBackoffMin = 100 * time.Millisecond
	listenBackoffMax = 5 * time.Second
)
