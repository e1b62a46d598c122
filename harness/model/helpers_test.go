package model

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"io"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/protocol"
)

// t0 is the tests' epoch; every step's now is t0 plus the bundle's offset.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

const (
	svcSynthetic = "synthetic.mp4"    // 10 cents
	svc720p      = "ffmpeg.h264_720p" // 40 cents
	buyerRich    = "buyer-rich"
	buyerPoor    = "buyer-poor" // 5 cents: affords nothing
	devA         = "dev-a"      // synthetic + 720p, 1 slot
	devB         = "dev-b"      // synthetic only, 1 slot
)

// seededIDs is a deterministic IDSource: three ChaCha8 streams derived from
// seed, one per kind, as the harness builds them.
func seededIDs(seed uint64) protocol.IDSource {
	stream := func(kind byte) io.Reader {
		var s [32]byte
		binary.LittleEndian.PutUint64(s[:], seed)
		s[31] = kind
		return rand.NewChaCha8(s)
	}
	return protocol.RandomIDs{Jobs: stream(1), Attempts: stream(2), Tokens: stream(3)}
}

// testBundle is one model with a clock, two buyers and two devices.
type testBundle struct {
	t   *testing.T
	m   *ExecutionModel
	now time.Time
}

func setup(t *testing.T, cfg Config) *testBundle {
	t.Helper()
	m := New(cfg, seededIDs(1))
	m.AddBuyer(buyerRich, 1000)
	m.AddBuyer(buyerPoor, 5)
	m.AddDevice(devA, []string{svcSynthetic, svc720p}, 1)
	m.AddDevice(devB, []string{svcSynthetic}, 1)
	return &testBundle{t: t, m: m, now: t0}
}

func (b *testBundle) tick(d time.Duration) { b.now = b.now.Add(d) }

// clean asserts that no invariant is broken, both by the model's
// incremental checker and by the test's independent check of the snapshot.
func (b *testBundle) clean() {
	b.t.Helper()
	require.Empty(b.t, b.m.CheckInvariants())
	require.Empty(b.t, snapshotViolations(b.m.Snapshot(), b.m.credits()))
}

// credits is what AddBuyer gave each buyer, for the snapshot check.
func (m *ExecutionModel) credits() map[string]int64 {
	out := make(map[string]int64, len(m.buyers))
	for id, b := range m.buyers {
		out[id] = b.initial
	}
	return out
}

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func request(buyer, service string) protocol.CreateJobRequest {
	return protocol.CreateJobRequest{
		BuyerID: buyer, Service: service, Params: map[string]string{"preset": "fast"},
		Input:       protocol.InputRef{URL: "https://in.example/x", Bytes: 100, SHA256: sha("input")},
		MaxAttempts: 3, AdmissionWindow: time.Hour,
	}
}

// create creates a job and returns its id.
func (b *testBundle) create(req protocol.CreateJobRequest) string {
	b.t.Helper()
	r := b.m.CreateJob(b.now, req)
	require.Equal(b.t, protocol.CodeCreated, r.Code, "%+v", r)
	b.clean()
	return r.JobID
}

// lease leases on dev and requires an offer.
func (b *testBundle) lease(dev string) protocol.Reply {
	b.t.Helper()
	r := b.m.Lease(b.now, dev)
	require.Equal(b.t, protocol.CodeLeaseOffer, r.Code, "%+v", r)
	b.clean()
	return r
}

func progressOf(o protocol.Reply, phase protocol.AttemptStatus) protocol.Progress {
	return protocol.Progress{JobID: o.JobID, AttemptID: o.AttemptID, LeaseEpoch: o.LeaseEpoch, Phase: phase}
}

// upload moves an offer's attempt to uploading.
func (b *testBundle) upload(dev string, o protocol.Reply) {
	b.t.Helper()
	r := b.m.Progress(b.now, dev, progressOf(o, protocol.AttemptUploading))
	require.Equal(b.t, protocol.CodeProgressOK, r.Code, "%+v", r)
	b.clean()
}

// commitOf is the commit an honest agent sends for an offer.
func commitOf(o protocol.Reply) protocol.Commit {
	return protocol.Commit{JobID: o.JobID, AttemptID: o.AttemptID, LeaseEpoch: o.LeaseEpoch, CommitToken: o.CommitToken,
		Output: protocol.Output{Key: protocol.OutputKey(o.JobID, o.AttemptID), Bytes: 2048, SHA256: sha(o.AttemptID)}}
}

func failOf(o protocol.Reply, code protocol.FailureCode) protocol.Fail {
	return protocol.Fail{JobID: o.JobID, AttemptID: o.AttemptID, LeaseEpoch: o.LeaseEpoch, CommitToken: o.CommitToken,
		FailureCode: code}
}

func withdrawalOf(o protocol.Reply) protocol.Withdrawal {
	return protocol.Withdrawal{JobID: o.JobID, AttemptID: o.AttemptID, LeaseEpoch: o.LeaseEpoch, CommitToken: o.CommitToken}
}

// job and attemptRow find rows in a fresh snapshot.
func (b *testBundle) job(id string) protocol.JobRow {
	b.t.Helper()
	for _, j := range b.m.Snapshot().Jobs {
		if j.ID == id {
			return j
		}
	}
	b.t.Fatalf("no job %s", id)
	return protocol.JobRow{}
}

func (b *testBundle) attemptRow(id string) protocol.AttemptRow {
	b.t.Helper()
	for _, a := range b.m.Snapshot().Attempts {
		if a.ID == id {
			return a
		}
	}
	b.t.Fatalf("no attempt %s", id)
	return protocol.AttemptRow{}
}

func (b *testBundle) buyerRow(id string) protocol.BuyerRow {
	b.t.Helper()
	for _, r := range b.m.Snapshot().Buyers {
		if r.ID == id {
			return r
		}
	}
	b.t.Fatalf("no buyer %s", id)
	return protocol.BuyerRow{}
}

func (b *testBundle) deviceRow(id string) protocol.DeviceRow {
	b.t.Helper()
	for _, r := range b.m.Snapshot().Devices {
		if r.ID == id {
			return r
		}
	}
	b.t.Fatalf("no device %s", id)
	return protocol.DeviceRow{}
}

// journalSince returns the journal rows appended after the first n.
func (b *testBundle) journalSince(n int) []protocol.EventRow {
	return b.m.Snapshot().Journal[n:]
}

func (b *testBundle) journalLen() int { return len(b.m.journal) }

// unchanged asserts that f mutates nothing: the snapshot is the same after.
func (b *testBundle) unchanged(f func()) {
	b.t.Helper()
	before := b.m.Snapshot()
	f()
	require.Equal(b.t, before, b.m.Snapshot())
	b.clean()
}

// ev is a journal row without its time, for compact expectations.
type ev struct {
	kind, from, to, code string
	actor                protocol.Actor
}

func evs(rows []protocol.EventRow) []ev {
	out := make([]ev, len(rows))
	for i, r := range rows {
		out[i] = ev{r.Kind, r.From, r.To, r.Code, r.Actor}
	}
	return out
}
