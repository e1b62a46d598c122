package sim

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/protocol"
)

func TestCreateJobCreated(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	id := b.create(request(buyerRich, svc720p))

	j := b.job(id)
	require.True(t, protocol.ValidID(id))
	require.Equal(t, protocol.JobQueued, j.Status)
	require.Equal(t, 3, j.MaxAttempts)
	require.Equal(t, 0, j.AttemptCount)
	require.Equal(t, t0, j.CreatedAt)
	require.Equal(t, t0.Add(time.Hour), j.AdmissionDeadline)
	require.Equal(t, protocol.HoldHeld, j.HoldStatus)
	require.EqualValues(t, 40, j.HoldCents)
	require.Equal(t, protocol.BuyerRow{ID: buyerRich, BalanceCents: 960, HeldCents: 40}, b.buyerRow(buyerRich))
	require.Equal(t, []ev{{"job", "", "queued", "", protocol.ActorBuyer}}, evs(b.journalSince(0)))
}

func TestCreateJobBoundariesAccepted(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	for _, mut := range []func(*protocol.CreateJobRequest){
		func(r *protocol.CreateJobRequest) { r.MaxAttempts = 1 },
		func(r *protocol.CreateJobRequest) { r.MaxAttempts = 10 },
		func(r *protocol.CreateJobRequest) { r.AdmissionWindow = time.Second },
		func(r *protocol.CreateJobRequest) { r.AdmissionWindow = 7 * 24 * time.Hour },
		func(r *protocol.CreateJobRequest) { r.Input.Bytes = 0 },
		func(r *protocol.CreateJobRequest) { r.Params = nil },
		func(r *protocol.CreateJobRequest) { r.Params = manyParams(32) },
		func(r *protocol.CreateJobRequest) {
			r.Params = map[string]string{strings.Repeat("a", 32): strings.Repeat("v", 256)}
		},
		func(r *protocol.CreateJobRequest) { r.IdempotencyKey = strings.Repeat("k", 200) },
	} {
		req := request(buyerRich, svcSynthetic)
		mut(&req)
		b.create(req)
	}
}

func manyParams(n int) map[string]string {
	p := make(map[string]string, n)
	for i := range n {
		p["p"+string(rune('a'+i%26))+string(rune('a'+i/26))] = "v"
	}
	return p
}

func TestCreateJobValidation(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		mut   func(*protocol.CreateJobRequest)
		code  protocol.Code
		field string
	}{
		{"unknown buyer", func(r *protocol.CreateJobRequest) { r.BuyerID = "nobody" }, protocol.CodeNotFound, "buyer"},
		{"unknown service", func(r *protocol.CreateJobRequest) { r.Service = "ffmpeg.av1" }, protocol.CodeValidation, "service"},
		{"max_attempts 0", func(r *protocol.CreateJobRequest) { r.MaxAttempts = 0 }, protocol.CodeValidation, "max_attempts"},
		{"max_attempts 11", func(r *protocol.CreateJobRequest) { r.MaxAttempts = 11 }, protocol.CodeValidation, "max_attempts"},
		{"window short", func(r *protocol.CreateJobRequest) { r.AdmissionWindow = time.Second - 1 }, protocol.CodeValidation, "admission_window"},
		{"window long", func(r *protocol.CreateJobRequest) { r.AdmissionWindow = 7*24*time.Hour + 1 }, protocol.CodeValidation, "admission_window"},
		{"input bytes", func(r *protocol.CreateJobRequest) { r.Input.Bytes = -1 }, protocol.CodeValidation, "input.bytes"},
		{"input sha upper", func(r *protocol.CreateJobRequest) { r.Input.SHA256 = strings.ToUpper(r.Input.SHA256) }, protocol.CodeValidation, "input.sha256"},
		{"input sha short", func(r *protocol.CreateJobRequest) { r.Input.SHA256 = "abc" }, protocol.CodeValidation, "input.sha256"},
		{"too many params", func(r *protocol.CreateJobRequest) { r.Params = manyParams(33) }, protocol.CodeValidation, "params"},
		{"param key upper", func(r *protocol.CreateJobRequest) { r.Params = map[string]string{"Preset": "x"} }, protocol.CodeValidation, "params"},
		{"param key empty", func(r *protocol.CreateJobRequest) { r.Params = map[string]string{"": "x"} }, protocol.CodeValidation, "params"},
		{"param key long", func(r *protocol.CreateJobRequest) { r.Params = map[string]string{strings.Repeat("a", 33): "x"} }, protocol.CodeValidation, "params"},
		{"param value long", func(r *protocol.CreateJobRequest) { r.Params = map[string]string{"a": strings.Repeat("v", 257)} }, protocol.CodeValidation, "params"},
		{"param value NUL", func(r *protocol.CreateJobRequest) { r.Params = map[string]string{"a": "x\x00"} }, protocol.CodeValidation, "params"},
		{"param value not UTF-8", func(r *protocol.CreateJobRequest) { r.Params = map[string]string{"a": "x\xff"} }, protocol.CodeValidation, "params"},
		{"idempotency key NUL", func(r *protocol.CreateJobRequest) { r.IdempotencyKey = "k\x00" }, protocol.CodeValidation, "idempotency_key"},
		{"idempotency key long", func(r *protocol.CreateJobRequest) { r.IdempotencyKey = strings.Repeat("k", 201) }, protocol.CodeValidation, "idempotency_key"},
		// The order: the first failing field wins.
		{"service before max_attempts", func(r *protocol.CreateJobRequest) { r.Service = "x"; r.MaxAttempts = 0 }, protocol.CodeValidation, "service"},
		{"max_attempts before window", func(r *protocol.CreateJobRequest) { r.MaxAttempts = 0; r.AdmissionWindow = 0 }, protocol.CodeValidation, "max_attempts"},
		{"sha before params", func(r *protocol.CreateJobRequest) { r.Input.SHA256 = ""; r.Params = manyParams(40) }, protocol.CodeValidation, "input.sha256"},
		{"buyer before everything", func(r *protocol.CreateJobRequest) { r.BuyerID = "x"; r.Service = "y" }, protocol.CodeNotFound, "buyer"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, Config{})
			req := request(buyerRich, svcSynthetic)
			tc.mut(&req)
			b.unchanged(func() {
				r := b.m.CreateJob(b.now, req)
				require.Equal(t, protocol.Reply{Code: tc.code, Field: tc.field}, r)
			})
		})
	}
}

func TestCreateJobInsufficientFunds(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	b.unchanged(func() {
		r := b.m.CreateJob(b.now, request(buyerPoor, svcSynthetic))
		require.Equal(t, protocol.Reply{Code: protocol.CodeInsufficientFunds}, r)
	})
}

func TestCreateJobIdempotency(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	b.m.AddBuyer("buyer-exact", 10) // affords exactly one synthetic job
	req := request("buyer-exact", svcSynthetic)
	req.IdempotencyKey = "order-1"
	id := b.create(req)

	// The same request again: the same job, nothing written, and funds are
	// not looked at (the buyer has nothing left).
	b.tick(time.Minute)
	b.unchanged(func() {
		r := b.m.CreateJob(b.now, req)
		require.Equal(t, protocol.Reply{Code: protocol.CodeCreated, JobID: id, Existing: true}, r)
	})

	// The same key with a different request, for each fingerprinted field.
	for _, mut := range []func(*protocol.CreateJobRequest){
		func(r *protocol.CreateJobRequest) { r.Service = svc720p },
		func(r *protocol.CreateJobRequest) { r.Params = map[string]string{"preset": "slow"} },
		func(r *protocol.CreateJobRequest) { r.Input.URL = "https://in.example/y" },
		func(r *protocol.CreateJobRequest) { r.MaxAttempts = 2 },
		func(r *protocol.CreateJobRequest) { r.AdmissionWindow = 2 * time.Hour },
	} {
		other := req
		mut(&other)
		b.unchanged(func() {
			r := b.m.CreateJob(b.now, other)
			require.Equal(t, protocol.Reply{Code: protocol.CodeIdempotencyConflict}, r)
		})
	}

	// Keys are per buyer.
	rich := request(buyerRich, svcSynthetic)
	rich.IdempotencyKey = "order-1"
	require.NotEqual(t, id, b.create(rich))
}
