package linearize

import (
	"context"
	"errors"
	"fmt"
	"github.com/rendermac/rendermac/client"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/rendermac/rendermac/harness/fuzz"
	"github.com/rendermac/rendermac/harness/targets"
	"github.com/rendermac/rendermac/internal/clock"
	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/api"
	"github.com/rendermac/rendermac/server/controlplane"
	"github.com/rendermac/rendermac/server/fencing"
	"github.com/rendermac/rendermac/server/grant"
)

// StackTarget is the target qualify checks: the control plane as two
// server processes sharing one database. The devices' operations run on
// the fenced service layer, the calls a gateway makes for a frame; the
// buyers' (cancel, and the read of a job) go through the real buyer API,
// controlplane.Assemble's handler served in process, of a second assembly
// over the same database; the sweeper runs on the service layer. Every
// client runs at once, so the API's reads and cancels race the devices'
// transactions and the sweeps, which the step-by-step differential, one
// operation at a time, never makes them do.
//
// The API decides at a stub clock moved to each operation's instant; the
// recorder runs every operation of one instant between two ticks, so all
// of them move it to the same place.
type StackTarget struct {
	*targets.PostgresTarget
	api  http.Handler
	keys map[string]string // buyer id -> API key

	mu    sync.Mutex // guards moving clock
	clock *clock.Stub
}

// NewStackTarget builds the stack over worker 0's database of w (emptied
// and seeded with the run's cast), the service broken as w.Variant says.
func NewStackTarget(ctx context.Context, w *targets.PostgresWorkers, seed uint64) (*StackTarget, error) {
	pt, err := NewPostgresTarget(ctx, w, seed)
	if err != nil {
		return nil, err
	}
	signer, err := grant.NewSigner([]byte(strings.Repeat("s", grant.MinKeyBytes)), "http://artifacts.invalid")
	if err != nil {
		return nil, err
	}
	t := &StackTarget{PostgresTarget: pt, keys: map[string]string{}, clock: clock.NewStub(fuzz.Epoch)}
	asm := controlplane.Assemble(controlplane.Parts{Pool: pt.Pool(), Store: pt.Store(), IDs: fuzz.IDSource(seed), Signer: signer,
		Clock: t.clock, Service: fencing.Config{LeaseTTL: fuzz.WorldLeaseTTL, HeartbeatWindow: fuzz.WorldHeartbeatWindow,
			Variant: w.Variant}})
	t.api = asm.API.Handler()
	for _, b := range fuzz.WorldBuyers {
		key, err := api.CreateAPIKey(ctx, pt.Pool(), b.ID)
		if err != nil {
			return nil, fmt.Errorf("seed buyer's API key: %w", err)
		}
		t.keys[b.ID] = key
	}
	return t, nil
}

// at moves the API's clock to now (never back).
func (t *StackTarget) at(now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if d := now.Sub(t.clock.Now()); d > 0 {
		t.clock.Advance(d)
	}
}

func (t *StackTarget) buyer(id string) (*client.Client, error) {
	key, ok := t.keys[id]
	if !ok {
		return nil, fmt.Errorf("buyer %s has no API key", id)
	}
	return targets.InProcessBuyer(t.api, key)
}

// Cancel implements Target with POST /v1/jobs/{id}/cancel as the buyer.
func (t *StackTarget) Cancel(ctx context.Context, now time.Time, buyer, job string) (protocol.Reply, error) {
	t.at(now)
	b, err := t.buyer(buyer)
	if err != nil {
		return protocol.Reply{}, err
	}
	return targets.CancelThroughAPI(ctx, b, job)
}

// GetJob implements Reader with GET /v1/jobs/{id} as the buyer.
func (t *StackTarget) GetJob(ctx context.Context, now time.Time, buyer, job string) (protocol.JobStatus, bool, error) {
	t.at(now)
	b, err := t.buyer(buyer)
	if err != nil {
		return "", false, err
	}
	d, err := b.Get(ctx, job)
	var se *client.Error
	switch {
	case errors.As(err, &se) && se.Status == http.StatusNotFound:
		return "", false, nil
	case err != nil:
		return "", false, fmt.Errorf("GET /v1/jobs/%s: %w", job, err)
	}
	return d.Status, true, nil
}
