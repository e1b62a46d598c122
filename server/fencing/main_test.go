package fencing_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/internal/mp4"
	"github.com/rendermac/rendermac/internal/pgprovider"
	"github.com/rendermac/rendermac/internal/pgtest"
	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/artifact"
	"github.com/rendermac/rendermac/server/fencing"
	"github.com/rendermac/rendermac/server/store"
)

// TestMain stops the shared Postgres cluster and then checks for leaked
// goroutines.
func TestMain(m *testing.M) { os.Exit(pgtest.Run(m, nil)) }

const (
	templateName = "rendermac_server"
	buyerID      = "00000000-0000-4000-8000-0000000000b1"
	otherBuyerID = "00000000-0000-4000-8000-0000000000b2"
	deviceID     = "00000000-0000-4000-8000-0000000000d1"
	otherDevice  = "00000000-0000-4000-8000-0000000000d2"
	missingID    = "00000000-0000-4000-8000-00000000dead"
	inputSHA     = "a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1"
	ttl          = 30 * time.Second
	price        = 10 // synthetic.mp4
	balance      = 1000
)

// t0 is the harness clock's origin; tests pass explicit instants, never the
// wall clock.
var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// bundle is one test's world: a fresh database, a service over it, an FS
// artifact store in a temp dir (behind a switch that can break it), two
// buyers with a balance, a device with four slots and one with a single slot.
type bundle struct {
	svc   *fencing.Service
	pool  *pgxpool.Pool
	store *flakyStore
	// violationsOK turns off the end-of-test invariant check, for variant
	// tests whose point is a broken state.
	violationsOK bool
}

func setup(t *testing.T, cfg fencing.Config) *bundle {
	t.Helper()
	ctx := context.Background()
	url := pgprovider.MustDatabase(t, templateName, store.Migrate)
	pool, err := store.OpenPool(ctx, url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	fs, err := artifact.NewFS(t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { _ = fs.Close() })
	cfg.LeaseTTL = ttl
	b := &bundle{pool: pool, store: &flakyStore{Store: fs}}
	// Seeded streams, as the harness uses: ids are reproducible per test.
	ids := protocol.RandomIDs{Jobs: rand.NewChaCha8([32]byte{1}), Attempts: rand.NewChaCha8([32]byte{2}), Tokens: rand.NewChaCha8([32]byte{3})}
	b.svc = fencing.NewService(pool, b.store, ids, cfg)
	require.NoError(t, b.svc.CreateBuyer(ctx, buyerID, "buyer", balance))
	require.NoError(t, b.svc.CreateBuyer(ctx, otherBuyerID, "other", balance))
	require.NoError(t, b.svc.CreateDevice(ctx, deviceID, "mac", []string{"synthetic.mp4"}, 4, protocol.HashCommitToken("dev1")))
	require.NoError(t, b.svc.CreateDevice(ctx, otherDevice, "mac2", []string{"synthetic.mp4"}, 1, protocol.HashCommitToken("dev2")))
	// Registered after pool.Close, so it runs before it: every test ends
	// with SPEC section 4 checked over the rows it left.
	t.Cleanup(func() {
		if !b.violationsOK {
			b.requireInvariants(t)
		}
	})
	return b
}

func (b *bundle) requireInvariants(t *testing.T) {
	t.Helper()
	v, err := store.CheckInvariants(context.Background(), b.pool)
	require.NoError(t, err)
	require.Empty(t, v, "invariant violations")
}

// flakyStore is an artifact.Store whose reads can be made to fail like a
// broken disk or network, to exercise "store I/O error is not a
// verification failure".
type flakyStore struct {
	artifact.Store
	broken atomic.Bool
	// deleteBroken fails deletes the same way.
	deleteBroken atomic.Bool
}

func (f *flakyStore) Delete(ctx context.Context, key string) error {
	if f.deleteBroken.Load() {
		return errDiskGone
	}
	return f.Store.Delete(ctx, key)
}

var errDiskGone = errors.New("disk unplugged")

func (f *flakyStore) Open(ctx context.Context, key string) (artifact.Reader, artifact.Object, error) {
	if f.broken.Load() {
		return nil, artifact.Object{}, errDiskGone
	}
	return f.Store.Open(ctx, key)
}

func request() protocol.CreateJobRequest {
	return protocol.CreateJobRequest{BuyerID: buyerID, Service: "synthetic.mp4", Params: map[string]string{"seed": "a"},
		Input: protocol.InputRef{URL: "https://in/x", Bytes: 10, SHA256: inputSHA}, MaxAttempts: 3,
		AdmissionWindow: time.Hour}
}

func (b *bundle) createJob(t *testing.T, now time.Time, edit func(*protocol.CreateJobRequest)) string {
	t.Helper()
	req := request()
	if edit != nil {
		edit(&req)
	}
	r, err := b.svc.CreateJob(context.Background(), now, req)
	require.NoError(t, err)
	require.Equal(t, protocol.CodeCreated, r.Code, "%+v", r)
	return r.JobID
}

func (b *bundle) lease(t *testing.T, now time.Time, device string) protocol.Reply {
	t.Helper()
	r, err := b.svc.Lease(context.Background(), now, device)
	require.NoError(t, err)
	require.Equal(t, protocol.CodeLeaseOffer, r.Code, "%+v", r)
	return r
}

func (b *bundle) progress(t *testing.T, now time.Time, device string, offer protocol.Reply, phase protocol.AttemptStatus) protocol.Reply {
	t.Helper()
	r, err := b.svc.Progress(context.Background(), now, device, protocol.Progress{JobID: offer.JobID,
		AttemptID: offer.AttemptID, LeaseEpoch: offer.LeaseEpoch, Phase: phase})
	require.NoError(t, err)
	return r
}

// uploaded creates a job, leases it on deviceID, moves it to uploading and
// stores a valid MP4 at the attempt's key. It returns the offer and the
// matching commit message.
func (b *bundle) uploaded(t *testing.T, now time.Time) (protocol.Reply, protocol.Commit) {
	t.Helper()
	b.createJob(t, now, nil)
	offer := b.lease(t, now, deviceID)
	require.Equal(t, protocol.CodeProgressOK, b.progress(t, now, deviceID, offer, protocol.AttemptUploading).Code)
	out := b.put(t, offer, mp4.Synthetic(mp4.SyntheticParams{Seed: offer.AttemptID}))
	return offer, commitOf(offer, out)
}

// put stores content at the offer's output key and returns the honest claim.
func (b *bundle) put(t *testing.T, offer protocol.Reply, content []byte) protocol.Output {
	t.Helper()
	key := protocol.OutputKey(offer.JobID, offer.AttemptID)
	_, err := b.store.Put(context.Background(), key, bytes.NewReader(content))
	require.NoError(t, err)
	sum := sha256.Sum256(content)
	return protocol.Output{Key: key, Bytes: int64(len(content)), SHA256: hex.EncodeToString(sum[:])}
}

func commitOf(offer protocol.Reply, out protocol.Output) protocol.Commit {
	return protocol.Commit{JobID: offer.JobID, AttemptID: offer.AttemptID, LeaseEpoch: offer.LeaseEpoch,
		CommitToken: offer.CommitToken, Output: out}
}

func failOf(offer protocol.Reply, code protocol.FailureCode) protocol.Fail {
	return protocol.Fail{JobID: offer.JobID, AttemptID: offer.AttemptID, LeaseEpoch: offer.LeaseEpoch,
		CommitToken: offer.CommitToken, FailureCode: code}
}

func (b *bundle) snapshot(t *testing.T) protocol.Snapshot {
	t.Helper()
	s, err := store.Snapshot(context.Background(), b.pool)
	require.NoError(t, err)
	return s
}

// find returns the row of rows whose id is id, failing the test without one.
func find[T any](t *testing.T, what string, rows []T, id string, idOf func(T) string) T {
	t.Helper()
	for _, r := range rows {
		if idOf(r) == id {
			return r
		}
	}
	t.Fatalf("no %s %s", what, id)
	var zero T
	return zero
}

func (b *bundle) job(t *testing.T, id string) protocol.JobRow {
	t.Helper()
	return find(t, "job", b.snapshot(t).Jobs, id, func(r protocol.JobRow) string { return r.ID })
}

func (b *bundle) attempt(t *testing.T, id string) protocol.AttemptRow {
	t.Helper()
	return find(t, "attempt", b.snapshot(t).Attempts, id, func(r protocol.AttemptRow) string { return r.ID })
}

func (b *bundle) buyer(t *testing.T, id string) protocol.BuyerRow {
	t.Helper()
	return find(t, "buyer", b.snapshot(t).Buyers, id, func(r protocol.BuyerRow) string { return r.ID })
}

// journalOf returns the journal rows of one job as "kind from->to code actor".
func (b *bundle) journalOf(t *testing.T, jobID string) []string {
	t.Helper()
	var out []string
	for _, e := range b.snapshot(t).Journal {
		if e.JobID == jobID {
			out = append(out, e.Kind+" "+e.From+"->"+e.To+" "+e.Code+" "+string(e.Actor))
		}
	}
	return out
}
