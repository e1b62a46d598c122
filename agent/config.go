package agent

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"time"

	"github.com/rendermac/rendermac/agent/runner"
	"github.com/rendermac/rendermac/internal/clock"
)

// Version is the agent version sent in hello when Config.AgentVersion is empty.
const Version = "rendermac-agent/0.1.0"

// Defaults of Config's tunables.
const (
	DefaultBackoffBase     = 250 * time.Millisecond
	DefaultBackoffMax      = 30 * time.Second
	DefaultShutdownTimeout = 5 * time.Second
	// DefaultPingInterval and DefaultPingTimeout bound how long a dead
	// connection (a half-open one after a Wi-Fi change or a wake from sleep:
	// no RST, no FIN, nothing to read) goes unnoticed: the agent pings the
	// gateway every interval and drops the connection when no pong comes
	// back within the timeout. Both are also capped at a third of the lease
	// TTL the gateway's welcome states (see pingTimings).
	DefaultPingInterval = 10 * time.Second
	DefaultPingTimeout  = 10 * time.Second
	// DefaultMinFreeBytes is the free space the work dir's file system must
	// have for the agent to take an offer.
	DefaultMinFreeBytes = 256 << 20
	// MaxSlots bounds Config.Slots, as hello's slots_total does on the wire.
	MaxSlots = 64
)

// Config is everything an Agent needs. Zero tunables take the defaults above.
type Config struct {
	// ServerURL is the control plane's http or https base URL; the session is
	// GET {ServerURL}/v1/provider/ws with the ws or wss scheme.
	ServerURL string
	// FailoverURLs are further base URLs of the same control plane (other
	// gateway processes sharing its database). The agent connects to
	// ServerURL first and, each time a session fails, tries the next URL in
	// turn after the backoff, so that a dead gateway costs one reconnect.
	// Artifact URLs in offers are absolute and used as given.
	FailoverURLs []string
	// DeviceToken authenticates the session (Authorization: Bearer).
	DeviceToken string
	// Services are the services this device offers, each with a runner.
	Services []string
	// Slots is how many attempts may run at once, 1..MaxSlots.
	Slots int
	// WorkDir holds each attempt's input and output while it runs.
	WorkDir string
	// AgentVersion is reported in hello; "" means Version.
	AgentVersion string
	// Clock drives heartbeats, backoff and runner delays; nil means the wall clock.
	Clock clock.Clock
	// Rand draws backoff jitter. Required: a shared fixed seed would make a
	// fleet of agents reconnect in lockstep, the herd jitter exists to break.
	// Only the connection loop uses it, so it need not be goroutine-safe.
	Rand *rand.Rand
	// Logger receives the agent's logs; nil discards them.
	Logger *slog.Logger
	// Transport verifies the server (CA file, pin) and refuses plain http
	// to anything but loopback; it builds HTTPClient when that is nil.
	Transport Transport
	// HTTPClient dials the session and moves artifacts; nil means
	// Transport.Client(). A harness may give its own (a relay's).
	HTTPClient *http.Client
	// Runners maps service names to runners; nil means runner.Builtin with
	// ffmpeg on PATH.
	Runners map[string]runner.Runner
	// BackoffBase and BackoffMax bound reconnect delays (full jitter).
	BackoffBase, BackoffMax time.Duration
	// ShutdownTimeout bounds the best-effort fail frames sent on shutdown.
	ShutdownTimeout time.Duration
	// PingInterval and PingTimeout are the agent's own liveness check of
	// its connection (defaults above).
	PingInterval, PingTimeout time.Duration
	// MinFreeBytes is the free space below which the agent reports no free
	// slot and refuses offers; 0 means DefaultMinFreeBytes, negative turns
	// the check off.
	MinFreeBytes int64
	// FreeBytes reports the space available on the file system of dir (the
	// work dir), or false when it cannot say; nil means the file system's
	// own count (statfs). A harness gives its own to put the agent on a
	// full disk without filling one.
	FreeBytes func(dir string) (int64, bool)
	// Variant is a deliberately broken behaviour for the harness; only a
	// -tags mutations build has any (variant_on.go).
	Variant Variant
}

// withDefaults validates c and fills in defaults. It does no I/O.
func (c Config) withDefaults() (Config, *url.URL, error) {
	base, err := parseServerURL(c.ServerURL)
	if err != nil {
		return c, nil, err
	}
	if err := c.Transport.CheckURL("--server", base); err != nil {
		return c, nil, err
	}
	switch {
	case c.DeviceToken == "":
		return c, nil, errors.New("agent config: device token is required")
	case c.Slots < 1 || c.Slots > MaxSlots:
		return c, nil, fmt.Errorf("agent config: slots must be 1..%d, got %d", MaxSlots, c.Slots)
	case c.WorkDir == "":
		return c, nil, errors.New("agent config: work dir is required")
	case c.Rand == nil:
		return c, nil, errors.New("agent config: a random source for backoff jitter is required")
	}
	if c.WorkDir, err = filepath.Abs(c.WorkDir); err != nil {
		return c, nil, fmt.Errorf("agent config: work dir: %w", err)
	}
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
	if c.Runners == nil {
		c.Runners = runner.Builtin(c.Clock, "")
	}
	if err := checkServices(c.Services, c.Runners); err != nil {
		return c, nil, err
	}
	if c.AgentVersion == "" {
		c.AgentVersion = Version
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.HTTPClient == nil {
		if c.HTTPClient, err = c.Transport.Client(); err != nil {
			return c, nil, err
		}
	}
	c.BackoffBase = orDefault(c.BackoffBase, DefaultBackoffBase)
	c.BackoffMax = orDefault(c.BackoffMax, DefaultBackoffMax)
	c.ShutdownTimeout = orDefault(c.ShutdownTimeout, DefaultShutdownTimeout)
	c.PingInterval = orDefault(c.PingInterval, DefaultPingInterval)
	c.PingTimeout = orDefault(c.PingTimeout, DefaultPingTimeout)
	if c.MinFreeBytes == 0 {
		c.MinFreeBytes = DefaultMinFreeBytes
	}
	if c.FreeBytes == nil {
		c.FreeBytes = freeBytes
	}
	if err := CheckVariant(c.Variant); err != nil {
		return c, nil, err
	}
	return c, base, nil
}

func orDefault(v, def time.Duration) time.Duration {
	if v <= 0 {
		return def
	}
	return v
}

func checkServices(services []string, runners map[string]runner.Runner) error {
	if len(services) == 0 {
		return errors.New("agent config: at least one service is required")
	}
	for i, s := range services {
		if _, ok := runners[s]; !ok {
			return fmt.Errorf("agent config: service %q has no runner", s)
		}
		if slices.Contains(services[:i], s) {
			return fmt.Errorf("agent config: service %q listed twice", s)
		}
	}
	return nil
}

// parseServerURL accepts an absolute http or https URL without query or
// fragment; a path is kept as a prefix for every endpoint.
func parseServerURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("server URL: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("server URL %q: must be an absolute http or https URL", s)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return nil, fmt.Errorf("server URL %q: must not carry a query, fragment or user info", s)
	}
	return u, nil
}

// endpoint joins a path below the server's base URL.
func endpoint(base *url.URL, elem ...string) *url.URL { return base.JoinPath(elem...) }

// sessionURL is the WebSocket URL: the base URL's scheme mapped to ws or wss.
func sessionURL(base *url.URL) string {
	u := endpoint(base, "v1", "provider", "ws")
	u.Scheme = map[string]string{"http": "ws", "https": "wss"}[u.Scheme]
	return u.String()
}
