package targets

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rendermac/rendermac/harness/deviceclient"
	"github.com/rendermac/rendermac/harness/fuzz"
	"github.com/rendermac/rendermac/internal/clock"
	"github.com/rendermac/rendermac/internal/s3provider"
	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/api"
	"github.com/rendermac/rendermac/server/artifact"
	"github.com/rendermac/rendermac/server/controlplane"
	"github.com/rendermac/rendermac/server/fencing"
	"github.com/rendermac/rendermac/server/gateway"
	"github.com/rendermac/rendermac/server/grant"
)

// DeviceToken is the bearer token of a world device in the full stack;
// devices.token_hash is its lowercase hex SHA-256.
func DeviceToken(deviceID string) string { return "device-token-" + deviceID }

// NoPingHeartbeat is a gateway ping interval longer than any run's logical
// time: on a stub clock no ping (whose pong heartbeats a device at an
// instant the harness does not choose) ever fires.
const NoPingHeartbeat = 10 * 365 * 24 * time.Hour

// waitTimeout bounds every wait for the stack; a stack that does not
// answer within it is an infrastructure error of the run.
const waitTimeout = 10 * time.Second

// Target builds the full stack for one run of seed over worker's database,
// emptied and seeded with the world's cast. probe is the run's model (nil:
// every split commit runs on the service layer).
func (w *StackWorkers) Target(ctx context.Context, worker int, seed uint64, probe *CommitProbe) (*StackTarget, error) {
	r, err := w.resources(ctx, worker)
	if err != nil {
		return nil, err
	}
	if err := r.emptier.emptyAll(ctx, r.pool); err != nil {
		return nil, err
	}
	st, err := w.artifacts(ctx, r, seed)
	if err != nil {
		return nil, err
	}
	t := &StackTarget{r: r, marks: &w.Marks, probe: probe, store: st, clock: clock.NewStub(fuzz.Epoch),
		ids: &sharedIDs{ids: fuzz.IDSource(seed)}, apiKeys: map[string]string{},
		frames: map[string]*deviceclient.Client{}, leases: map[string]*deviceclient.Client{}}
	if err := t.build(ctx, w.Variant); err != nil {
		_ = t.Close()
		return nil, err
	}
	return t, nil
}

// artifacts is one run's artifact store: the worker's directory, or with
// StackWorkers.S3 a fresh prefix of the worker's bucket.
func (w *StackWorkers) artifacts(ctx context.Context, r *stackResources, seed uint64) (artifact.Store, error) {
	if w.S3 == nil {
		return artifact.NewFSUnsynced(r.dir)
	}
	return artifact.NewS3(ctx, artifact.S3Config{Bucket: r.bucket, Prefix: fmt.Sprintf("seed%d-%s/", seed, rand.Text()),
		Endpoint: w.S3.Endpoint(), PathStyle: true, Region: s3provider.Region, AccessKey: s3provider.AccessKey,
		SecretKey: s3provider.SecretKey, HTTPClient: r.s3http})
}

func (t *StackTarget) build(ctx context.Context, variant fencing.Variant) error {
	signer, err := grant.NewSigner([]byte(strings.Repeat("s", grant.MinKeyBytes)), "http://artifacts.invalid")
	if err != nil {
		return err
	}
	t.signer = signer
	// TouchWindow: a microsecond of the pinned clock, not the (endless)
	// heartbeat, so that the gateway's own liveness writes still happen
	// after every time move (and normalization 3 still undoes them), while
	// frames at one instant exercise their coalescing.
	parts := func(pool *pgxpool.Pool) controlplane.Parts {
		return controlplane.Parts{Pool: pool, Store: t.store, IDs: t.ids, Signer: signer, Clock: t.clock,
			Service: fencing.Config{LeaseTTL: fuzz.WorldLeaseTTL, HeartbeatWindow: fuzz.WorldHeartbeatWindow, Variant: variant},
			Gateway: gateway.Config{LeaseTTL: fuzz.WorldLeaseTTL, Heartbeat: NoPingHeartbeat, TouchWindow: time.Microsecond,
				PollInterval: -1, SweepInterval: -1, MaxBadMessages: 1 << 30}}
	}
	// Three assemblies of one process's wiring over the run's three pools:
	// the buyer API's (its gateway is never served), the frames gateway's
	// and the lease gateway's (their APIs are never served), so that the
	// transaction signals of each pool are told apart.
	main := controlplane.Assemble(parts(t.r.pool))
	t.svc, t.api = main.Service, main.API.Handler()
	if err := t.seed(ctx); err != nil {
		return err
	}
	framesParts := parts(t.r.poolF)
	framesParts.Gateway.ListenConn = t.r.listen.lend
	t.gwF, t.gwL = controlplane.Assemble(framesParts).Gateway, controlplane.Assemble(parts(t.r.poolL)).Gateway
	t.srvF, t.srvL = httptest.NewServer(t.gwF.Handler()), httptest.NewServer(t.gwL.Handler())
	seeded, err := t.liveness(ctx, "")
	if err != nil {
		return err
	}
	if err := t.connect(ctx); err != nil {
		return err
	}
	// hello heartbeats the device; the model's world starts unseen.
	if _, err := t.restore(ctx, seeded); err != nil {
		return err
	}
	return t.listen()
}

// seed inserts the world's buyers (with an API key each) and devices (with
// a known device token each).
func (t *StackTarget) seed(ctx context.Context) error {
	for _, b := range fuzz.WorldBuyers {
		if err := t.svc.CreateBuyer(ctx, b.ID, "buyer-"+b.ID[len(b.ID)-1:], b.BalanceCents); err != nil {
			return fmt.Errorf("seed buyer: %w", err)
		}
		key, err := api.CreateAPIKey(ctx, t.r.pool, b.ID)
		if err != nil {
			return fmt.Errorf("seed buyer: %w", err)
		}
		t.apiKeys[b.ID] = key
	}
	for _, d := range fuzz.WorldDevices {
		hash := protocol.HashCommitToken(DeviceToken(d.ID))
		if err := t.svc.CreateDevice(ctx, d.ID, "mac-"+d.ID[len(d.ID)-1:], d.Services, d.SlotsTotal, hash); err != nil {
			return fmt.Errorf("seed device: %w", err)
		}
	}
	return seedOperator(ctx, t.r.pool)
}

// connect opens two sessions per device, each with hello slots_free 0 so
// that no gateway offers on its own: one on the lease gateway, which only
// ever gets slots reports (so no result ever frees a slot there), and one on
// the frames gateway for progress, commit and fail, made offer-less for good
// (see latch).
//
// The devices are connected at once (one after the other, their sessions
// were a third of a run's setup time), each device's frames session before
// its lease session as before: the two hellos lock the same row, so
// together they would only wait for each other. The devices' order cannot
// show: a hello writes only its own device's row (services, slots_total,
// a heartbeat at the pinned clock's one instant that build undoes), no
// gateway offers into slots_free 0, and no notification is sent (the
// listener starts after build's restore). The latches, whose transaction
// signal must not be shared, run one after the other once every session is
// welcomed.
func (t *StackTarget) connect(ctx context.Context) error {
	type dialled struct {
		c   *deviceclient.Client
		err error
	}
	devices := fuzz.WorldDevices
	out := make([][2]dialled, len(devices)) // each device's frames and lease sessions
	var wg sync.WaitGroup
	for i, d := range devices {
		wg.Go(func() {
			for j, url := range [2]string{t.srvF.URL, t.srvL.URL} {
				if out[i][j].c, out[i][j].err = hello(ctx, url, d); out[i][j].err != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	var errs []error
	for i, d := range devices {
		for _, o := range out[i] {
			if o.c != nil {
				t.clients = append(t.clients, o.c) // closed by Close, even on an error
			}
			errs = append(errs, o.err)
		}
		t.frames[d.ID], t.leases[d.ID] = out[i][0].c, out[i][1].c
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for _, d := range devices {
		if err := t.latch(ctx, d.ID); err != nil {
			return err
		}
	}
	return nil
}

// hello dials the gateway at baseURL as device d and says hello with
// slots_free 0. A session that dialled but was not welcomed is returned
// with the error, to be closed.
func hello(ctx context.Context, baseURL string, d fuzz.WorldDevice) (*deviceclient.Client, error) {
	ctx, cancel := context.WithTimeout(ctx, waitTimeout)
	defer cancel()
	c, _, err := deviceclient.Dial(ctx, deviceclient.WSURL(baseURL, gateway.Path), DeviceToken(d.ID))
	if err != nil {
		return nil, fmt.Errorf("dial gateway as %s: %w", d.ID, err)
	}
	if _, err := c.Hello(ctx, d.Services, d.SlotsTotal, 0); err != nil {
		return c, fmt.Errorf("hello as %s: %w", d.ID, err)
	}
	return c, nil
}

// latch makes the device's frames session offer-less for good. The gateway
// frees a slot after every commit or fail result it sends and offers into
// it at once, a lease the model's pull Lease never makes. A session whose
// Lease once answered not_found (a revoked device) makes no more offers, so
// the device is revoked for one slots report; build then puts every device
// row back as seeded.
func (t *StackTarget) latch(ctx context.Context, deviceID string) error {
	if err := t.svc.RevokeDevice(ctx, deviceID); err != nil {
		return fmt.Errorf("latch %s: %w", deviceID, err)
	}
	done := t.r.txF.arm()
	if err := t.send(ctx, t.frames[deviceID], &protocol.Slots{Type: protocol.TypeSlots, SlotsFree: 1}); err != nil {
		return err
	}
	return waitSignal(ctx, done, "the frames session's not_found lease")
}

// listen runs the frames gateway's background loops (poll and sweep are
// off): its LISTEN/NOTIFY listener pushes cancel notices to the devices'
// frames sessions. The lease gateway runs none: a jobs notification would
// wake its sessions, and one left with a free slot by a no_job reply
// would lease on its own.
func (t *StackTarget) listen() error {
	ctx, stop := context.WithCancel(context.Background())
	t.stopRun, t.runDone = stop, make(chan error, 1)
	go func() { t.runDone <- t.gwF.Run(ctx) }()
	select {
	case <-t.gwF.Listening():
		return nil
	case <-time.After(waitTimeout):
		return errors.New("frames gateway never started listening")
	}
}

func waitSignal(ctx context.Context, ch <-chan struct{}, what string) error {
	ctx, cancel := context.WithTimeout(ctx, waitTimeout)
	defer cancel()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
	}
}

// Close implements fuzz.Target: it ends the sessions, drains both
// gateways and stops the listener, which hands the worker's connection back
// reset (listenerConn) before Run returns, so nothing of the run touches
// the database after it (the next run empties it).
func (t *StackTarget) Close() error {
	for _, c := range t.clients {
		c.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	var errs []error
	for _, gw := range []*gateway.Gateway{t.gwF, t.gwL} {
		if gw != nil {
			errs = append(errs, gw.Shutdown(ctx))
		}
	}
	if t.stopRun != nil {
		t.stopRun()
		errs = append(errs, <-t.runDone)
	}
	for _, s := range []*httptest.Server{t.srvF, t.srvL} {
		if s != nil {
			s.Close()
		}
	}
	if c, ok := t.store.(interface{ Close() error }); ok {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}
