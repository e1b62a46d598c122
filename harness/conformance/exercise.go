package conformance

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/harness/fuzz"
	"github.com/rendermac/rendermac/protocol"
)

// Options says what a target can express. The full stack reaches the
// contract only through the API and the gateways, which authenticate every
// caller and take a job's input as bytes, so a few cases do not apply
// there; the API's and the gateway's own tests cover those answers.
type Options struct {
	// Outputs is an attempt's honest output: what a target with a real
	// artifact store uploads before a commit (fuzz.HashOutput when nil).
	Outputs fuzz.OutputFunc
	// Strangers: buyer and device ids outside the world's cast, and ids
	// that are not UUIDs, reach the contract.
	Strangers bool
	// RawRequests: CreateJob sees the request as it is, input reference
	// and sub-second admission window included.
	RawRequests bool
	// MalformedFrames: device messages the wire's strict decoder refuses
	// as bad_message (an empty failure code, a phase outside the lease
	// phases, a negative size or malformed sha256 in a commit) reach the
	// contract.
	MalformedFrames bool
}

// Revoker is implemented by a target that can revoke a device (an admin
// operation, not part of fuzz.Target).
type Revoker interface {
	RevokeDevice(ctx context.Context, deviceID string) error
}

// WholeCommitter is implemented by a target that must be told that a
// commit runs both transactions in one step (the full stack sends it as one
// commit frame, and runs CommitBegin alone on the service layer). It
// returns transaction 1's reply and, when that was commit_pending, the
// final one.
type WholeCommitter interface {
	Commit(ctx context.Context, now time.Time, deviceID string, c protocol.Commit, outputOK bool) (begin, final protocol.Reply, err error)
}

// need is a capability a case requires of the target.
type need int

const (
	needStrangers need = 1 << iota
	needRawRequests
	needRevoke
)

// testCase is one contract case. run builds as many targets as it needs
// with setup, each a fresh world at fuzz.Epoch.
type testCase struct {
	name  string
	needs need
	run   func(t *testing.T, setup func(t *testing.T) *bundle)
}

// cases is the whole table, one group per file.
func cases() []testCase {
	var all []testCase
	for _, group := range [][]testCase{createCases, leaseCases, progressCases, commitCases, failCases, withdrawCases, cancelCases,
		sweepCases} {
		all = append(all, group...)
	}
	return all
}

// Exercise runs every case against targets made by newTarget, each case in
// parallel on its own target. newTarget returns a fresh world: the cast of
// fuzz.WorldBuyers and fuzz.WorldDevices, ids drawn as
// fuzz.IDSource(1) draws them, nothing else.
func Exercise(t *testing.T, newTarget func(t *testing.T) fuzz.Target, opts Options) {
	if opts.Outputs == nil {
		opts.Outputs = fuzz.HashOutput
	}
	for _, c := range cases() {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if why := missing(c.needs, opts); why != "" {
				t.Skipf("the target cannot express %s", why)
			}
			setup := func(t *testing.T) *bundle {
				t.Helper()
				b := newBundle(t, newTarget(t), opts)
				if _, ok := b.tg.(Revoker); c.needs&needRevoke != 0 && !ok {
					t.Skip("the target cannot revoke a device")
				}
				return b
			}
			c.run(t, setup)
		})
	}
}

func missing(n need, opts Options) string {
	switch {
	case n&needStrangers != 0 && !opts.Strangers:
		return "callers outside the cast"
	case n&needRawRequests != 0 && !opts.RawRequests:
		return "input references and sub-second windows"
	}
	return ""
}

// The cast, named by role.
var (
	buyerRich = fuzz.WorldBuyers[0].ID  // 2000 cents
	buyerPoor = fuzz.WorldBuyers[1].ID  // 150 cents
	devA      = fuzz.WorldDevices[0].ID // synthetic and 720p, 2 slots
	devB      = fuzz.WorldDevices[1].ID // synthetic, 1 slot
	// missingID is a well-formed id nothing has.
	missingID = "00000000-0000-4000-8000-00000000dead"
)

const (
	svcSynthetic = "synthetic.mp4"    // 10 cents
	svc720p      = "ffmpeg.h264_720p" // 40 cents
	ttl          = fuzz.WorldLeaseTTL
	price        = 10 // synthetic.mp4
	// inputSHA is the SHA-256 of "test", the input the full stack uploads.
	inputSHA = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
)

func balanceOf(buyer string) int64 {
	for _, b := range fuzz.WorldBuyers {
		if b.ID == buyer {
			return b.BalanceCents
		}
	}
	panic("no buyer " + buyer)
}

func request(buyer, service string) protocol.CreateJobRequest {
	return protocol.CreateJobRequest{BuyerID: buyer, Service: service, Params: map[string]string{"preset": "fast"},
		Input:       protocol.InputRef{URL: "https://in.example/x", Bytes: 4, SHA256: inputSHA},
		MaxAttempts: 3, AdmissionWindow: time.Hour}
}

func progressOf(o protocol.Reply, phase protocol.AttemptStatus) protocol.Progress {
	return protocol.Progress{Type: protocol.TypeProgress, JobID: o.JobID, AttemptID: o.AttemptID, LeaseEpoch: o.LeaseEpoch, Phase: phase}
}

func failOf(o protocol.Reply, code protocol.FailureCode) protocol.Fail {
	return protocol.Fail{Type: protocol.TypeFail, JobID: o.JobID, AttemptID: o.AttemptID, LeaseEpoch: o.LeaseEpoch,
		CommitToken: o.CommitToken, FailureCode: code}
}

func conflict(reason protocol.ConflictReason) protocol.Reply {
	return protocol.Reply{Code: protocol.CodeLeaseConflict, Reason: reason}
}

// normal drops what the contract does not fix (a reply's free-text message)
// and puts times in UTC at the microsecond Postgres keeps.
func normal(r protocol.Reply) protocol.Reply {
	r.Message = ""
	if !r.LeaseExpiresAt.IsZero() {
		r.LeaseExpiresAt = r.LeaseExpiresAt.UTC().Round(time.Microsecond)
	}
	return r
}

func requireNoError(t *testing.T, err error) {
	t.Helper()
	require.NoError(t, err, "infrastructure")
}
