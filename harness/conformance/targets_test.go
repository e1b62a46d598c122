package conformance_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/harness/conformance"
	"github.com/rendermac/rendermac/harness/fuzz"
	"github.com/rendermac/rendermac/harness/targets"
	"github.com/rendermac/rendermac/internal/pgprovider"
	"github.com/rendermac/rendermac/internal/pgtest"
	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/fencing"
	"github.com/rendermac/rendermac/server/store"
)

// TestMain stops the shared Postgres cluster and then checks for leaked
// goroutines: every case's pools, gateways and sessions must be closed.
func TestMain(m *testing.M) { os.Exit(pgtest.Run(m, nil)) }

// database returns a fresh migrated database of its own for one case, as a
// worker list of one for the targets' constructors.
func database(t *testing.T) (string, func(context.Context) (string, error)) {
	url := pgprovider.MustDatabase(t, targets.TemplateName, store.Migrate)
	return url, func(context.Context) (string, error) { return url, nil }
}

// pgTarget is the Postgres service layer with device revocation, an admin
// operation of fencing.Service outside fuzz.Target.
type pgTarget struct {
	*targets.PostgresTarget
	admin *fencing.Service
}

func (p pgTarget) RevokeDevice(ctx context.Context, id string) error {
	return p.admin.RevokeDevice(ctx, id)
}

// TestConformancePostgres runs the contract's cases against the Postgres
// service layer, each on a database of its own.
func TestConformancePostgres(t *testing.T) {
	t.Parallel()
	conformance.Exercise(t, func(t *testing.T) fuzz.Target {
		ctx := context.Background()
		url, newDB := database(t)
		w, err := targets.NewPostgresWorkers(ctx, 1, fencing.VariantNone, newDB)
		require.NoError(t, err)
		t.Cleanup(w.Close)
		pg, err := w.Target(ctx, 0, 1)
		require.NoError(t, err)
		pool, err := store.OpenPool(ctx, url)
		require.NoError(t, err)
		t.Cleanup(pool.Close)
		return pgTarget{PostgresTarget: pg, admin: fencing.NewService(pool, nil, nil, fencing.Config{})}
	}, conformance.Options{Outputs: targets.SyntheticOutput, Strangers: true, RawRequests: true, MalformedFrames: true})
}

// TestConformanceStack runs the contract's cases against the full stack
// (API handler, gateways over WebSockets), each on a database of its own.
func TestConformanceStack(t *testing.T) {
	t.Parallel()
	conformance.Exercise(t, func(t *testing.T) fuzz.Target {
		ctx := context.Background()
		_, newDB := database(t)
		w, err := targets.NewStackWorkers(ctx, 1, fencing.VariantNone, newDB)
		require.NoError(t, err)
		t.Cleanup(w.Close)
		s := &steer{}
		probe := targets.NewCommitProbe(s)
		st, err := w.Target(ctx, 0, 1, probe)
		require.NoError(t, err)
		return &stackTarget{StackTarget: st, probe: probe, steer: s}
	}, conformance.Options{Outputs: targets.SyntheticOutput})
}

// stackTarget tells the full stack which commits are whole (one commit
// frame on the wire) and which are transaction 1 alone (the service layer),
// through the CommitProbe the stack reads that from.
type stackTarget struct {
	*targets.StackTarget
	probe *targets.CommitProbe
	steer *steer
}

// CommitBegin implements fuzz.Target: transaction 1 alone.
func (s *stackTarget) CommitBegin(ctx context.Context, now time.Time, dev string, c protocol.Commit, ok bool) (protocol.Reply, error) {
	s.steer.code = protocol.CodeCommitPending
	if _, err := s.probe.CommitBegin(ctx, now, dev, c, ok); err != nil {
		return protocol.Reply{}, err
	}
	return s.StackTarget.CommitBegin(ctx, now, dev, c, ok)
}

// Commit implements conformance.WholeCommitter: one commit frame.
func (s *stackTarget) Commit(ctx context.Context, now time.Time, dev string, c protocol.Commit, ok bool) (begin, final protocol.Reply, err error) {
	s.steer.code = protocol.CodeCommitOK
	if _, err := s.probe.CommitBegin(ctx, now, dev, c, ok); err != nil {
		return begin, final, err
	}
	begin, err = s.StackTarget.CommitBegin(ctx, now, dev, c, ok)
	if err != nil || begin.Code != protocol.CodeCommitPending {
		return begin, final, err
	}
	final, err = s.StackTarget.CommitFinish(ctx, now, c.JobID, c.AttemptID)
	return begin, final, err
}

// steer stands where the model stands in a three-way run, behind the
// stack's CommitProbe: the probe classifies the stack's next CommitBegin by
// the code steer answered (commit_pending without a finish: transaction 1
// alone; anything else: a whole commit). Only the commit methods are
// called.
type steer struct {
	fuzz.Target
	code protocol.Code
}

func (s *steer) CommitBegin(context.Context, time.Time, string, protocol.Commit, bool) (protocol.Reply, error) {
	return protocol.Reply{Code: s.code}, nil
}
