package conformance

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/protocol"
)

var createCases = []testCase{
	{name: "CreateJobCreated", run: func(t *testing.T, setup func(*testing.T) *bundle) {
		b := setup(t)
		id := b.create(request(buyerRich, svc720p))
		require.True(t, protocol.ValidID(id))
		require.Equal(t, protocol.JobRow{ID: id, BuyerID: buyerRich, Service: svc720p, Status: protocol.JobQueued,
			MaxAttempts: 3, CreatedAt: b.now, AdmissionDeadline: b.now.Add(time.Hour), HoldStatus: protocol.HoldHeld,
			HoldCents: 40}, b.job(id))
		require.Equal(t, protocol.BuyerRow{ID: buyerRich, BalanceCents: balanceOf(buyerRich) - 40, HeldCents: 40}, b.buyer(buyerRich))
		require.Equal(t, []string{"job ->queued  buyer"}, lines(b.journalSince(0)))
	}},
	{name: "CreateJobNotFoundBuyer", needs: needStrangers, run: func(t *testing.T, setup func(*testing.T) *bundle) {
		b := setup(t)
		for _, id := range []string{missingID, "not-a-uuid", "nobody", strings.ToUpper(buyerRich)} {
			req := request(id, svcSynthetic)
			req.Service = "unknown" // the buyer check comes first
			b.unchanged(func() {
				require.Equal(t, protocol.Reply{Code: protocol.CodeNotFound, Field: "buyer"}, b.createReply(req), id)
			})
		}
		require.Empty(t, b.snapshot().Jobs)
	}},
	{name: "CreateJobValidation", run: func(t *testing.T, setup func(*testing.T) *bundle) {
		validation(t, setup(t), validationCases)
	}},
	{name: "CreateJobValidationOfInputAndWindow", needs: needRawRequests, run: func(t *testing.T, setup func(*testing.T) *bundle) {
		validation(t, setup(t), rawValidationCases)
	}},
	{name: "CreateJobInsufficientFunds", run: func(t *testing.T, setup func(*testing.T) *bundle) {
		b := setup(t)
		// Three 720p holds leave the poor buyer 30 cents, short of a fourth.
		for range 3 {
			b.create(request(buyerPoor, svc720p))
		}
		b.unchanged(func() {
			require.Equal(t, protocol.Reply{Code: protocol.CodeInsufficientFunds}, b.createReply(request(buyerPoor, svc720p)))
		})
		require.Len(t, b.snapshot().Jobs, 3)
		require.Equal(t, protocol.BuyerRow{ID: buyerPoor, BalanceCents: 30, HeldCents: 120}, b.buyer(buyerPoor))
	}},
	{name: "CreateJobIdempotency", run: createJobIdempotency},
}

// validationCase is a request edit refused with a validation_error (or
// not_found) on field.
type validationCase struct {
	name  string
	edit  func(*protocol.CreateJobRequest)
	field string
}

func manyParams(n int) map[string]string {
	p := make(map[string]string, n)
	for i := range n {
		p["p"+string(rune('a'+i%26))+string(rune('a'+i/26))] = "v"
	}
	return p
}

var validationCases = []validationCase{
	{"unknown service", func(r *protocol.CreateJobRequest) { r.Service = "ffmpeg.av1" }, "service"},
	{"max_attempts 0", func(r *protocol.CreateJobRequest) { r.MaxAttempts = 0 }, "max_attempts"},
	{"max_attempts 11", func(r *protocol.CreateJobRequest) { r.MaxAttempts = 11 }, "max_attempts"},
	{"too many params", func(r *protocol.CreateJobRequest) { r.Params = manyParams(33) }, "params"},
	{"param key upper", func(r *protocol.CreateJobRequest) { r.Params = map[string]string{"Preset": "x"} }, "params"},
	{"param key empty", func(r *protocol.CreateJobRequest) { r.Params = map[string]string{"": "x"} }, "params"},
	{"param key long", func(r *protocol.CreateJobRequest) { r.Params = map[string]string{strings.Repeat("a", 33): "x"} }, "params"},
	{"param value long", func(r *protocol.CreateJobRequest) { r.Params = map[string]string{"a": strings.Repeat("v", 257)} }, "params"},
	// What Postgres text and jsonb cannot hold is refused before it gets there.
	{"param value NUL", func(r *protocol.CreateJobRequest) { r.Params = map[string]string{"a": "x\x00"} }, "params"},
	{"param value not UTF-8", func(r *protocol.CreateJobRequest) { r.Params = map[string]string{"a": "x\xff"} }, "params"},
	// A param the service declares must fit its type and bounds
	// (synthetic.mp4: duration_ms integer 1..600000, seed at most 64 bytes).
	{"declared param below min", func(r *protocol.CreateJobRequest) { r.Params = map[string]string{"duration_ms": "0"} }, "params"},
	{"declared param above max", func(r *protocol.CreateJobRequest) { r.Params = map[string]string{"duration_ms": "600001"} }, "params"},
	{"declared integer exponent", func(r *protocol.CreateJobRequest) { r.Params = map[string]string{"duration_ms": "1e3"} }, "params"},
	{"declared integer leading zero", func(r *protocol.CreateJobRequest) { r.Params = map[string]string{"duration_ms": "01"} }, "params"},
	{"declared integer plus", func(r *protocol.CreateJobRequest) { r.Params = map[string]string{"mdat_bytes": "+5"} }, "params"},
	{"declared integer text", func(r *protocol.CreateJobRequest) { r.Params = map[string]string{"delay_ms": "soon"} }, "params"},
	{"declared string long", func(r *protocol.CreateJobRequest) { r.Params = map[string]string{"seed": strings.Repeat("s", 65)} }, "params"},
	{"idempotency key NUL", func(r *protocol.CreateJobRequest) { r.IdempotencyKey = "k\x00" }, "idempotency_key"},
	{"idempotency key not UTF-8", func(r *protocol.CreateJobRequest) { r.IdempotencyKey = "key\xc3" }, "idempotency_key"},
	{"idempotency key long", func(r *protocol.CreateJobRequest) { r.IdempotencyKey = strings.Repeat("k", 201) }, "idempotency_key"},
	// The order: the first failing field wins.
	{"service before max_attempts", func(r *protocol.CreateJobRequest) { r.Service = "x"; r.MaxAttempts = 0 }, "service"},
	{"max_attempts before window", func(r *protocol.CreateJobRequest) { r.MaxAttempts = 0; r.AdmissionWindow = 0 }, "max_attempts"},
	{"window before params", func(r *protocol.CreateJobRequest) { r.AdmissionWindow = 0; r.Params = manyParams(40) }, "admission_window"},
}

// rawValidationCases edit what the full stack's API does not pass on as
// it is: the input reference, and windows that are not whole seconds.
var rawValidationCases = []validationCase{
	{"window short", func(r *protocol.CreateJobRequest) { r.AdmissionWindow = time.Second - 1 }, "admission_window"},
	{"window long", func(r *protocol.CreateJobRequest) { r.AdmissionWindow = 7*24*time.Hour + 1 }, "admission_window"},
	{"input bytes", func(r *protocol.CreateJobRequest) { r.Input.Bytes = -1 }, "input.bytes"},
	{"input sha upper", func(r *protocol.CreateJobRequest) { r.Input.SHA256 = strings.ToUpper(r.Input.SHA256) }, "input.sha256"},
	{"input sha short", func(r *protocol.CreateJobRequest) { r.Input.SHA256 = "abc" }, "input.sha256"},
	{"input sha 63", func(r *protocol.CreateJobRequest) { r.Input.SHA256 = r.Input.SHA256[:63] }, "input.sha256"},
	{"window before input", func(r *protocol.CreateJobRequest) { r.AdmissionWindow = time.Second - 1; r.Input.Bytes = -1 }, "admission_window"},
	{"bytes before sha", func(r *protocol.CreateJobRequest) { r.Input.Bytes = -1; r.Input.SHA256 = "" }, "input.bytes"},
	{"sha before params", func(r *protocol.CreateJobRequest) { r.Input.SHA256 = ""; r.Params = manyParams(40) }, "input.sha256"},
}

// validation checks that every case is refused on its field, writes
// nothing, and that the bounds themselves are valid.
func validation(t *testing.T, b *bundle, cases []validationCase) {
	for _, c := range cases {
		req := request(buyerRich, svcSynthetic)
		c.edit(&req)
		b.unchanged(func() {
			require.Equal(t, protocol.Reply{Code: protocol.CodeValidation, Field: c.field}, b.createReply(req), c.name)
		})
	}
	for _, edit := range []func(*protocol.CreateJobRequest){
		func(r *protocol.CreateJobRequest) {
			r.MaxAttempts, r.AdmissionWindow, r.IdempotencyKey = 10, 7*24*time.Hour, strings.Repeat("i", 200)
			r.Params = map[string]string{"seed": strings.Repeat("v", 64)}
		},
		func(r *protocol.CreateJobRequest) { r.MaxAttempts, r.AdmissionWindow = 1, time.Second },
		// Every key must be one the service declares, so the generic
		// bounds (32 keys of 32 bytes, 256-byte values) are reached valid
		// only by a catalogue that declares that many; the refusals past
		// them stay in validationCases.
		func(r *protocol.CreateJobRequest) { r.Params = map[string]string{"delay_ms": "600000"} },
		func(r *protocol.CreateJobRequest) { r.Params = nil },
		func(r *protocol.CreateJobRequest) {
			r.Params = map[string]string{"duration_ms": "600000", "mdat_bytes": "1", "delay_ms": "0", "seed": strings.Repeat("s", 64)}
		},
	} {
		req := request(buyerRich, svcSynthetic)
		edit(&req)
		b.create(req)
	}
	require.Len(t, b.snapshot().Jobs, 5, "validation errors write nothing")
}

func createJobIdempotency(t *testing.T, setup func(*testing.T) *bundle) {
	b := setup(t)
	// Leave the poor buyer exactly one synthetic job's hold: 150 - 80 - 40 - 10 - 10.
	for _, svc := range []string{"ffmpeg.h264_1080p", svc720p, svcSynthetic, svcSynthetic} {
		b.create(request(buyerPoor, svc))
	}
	req := request(buyerPoor, svcSynthetic)
	req.IdempotencyKey = "order-1"
	id := b.create(req)
	require.Zero(t, b.buyer(buyerPoor).BalanceCents)

	// The same request again: the same job, nothing written, and funds are
	// not looked at (the buyer has nothing left).
	b.tick(time.Minute)
	b.unchanged(func() {
		require.Equal(t, protocol.Reply{Code: protocol.CodeCreated, JobID: id, Existing: true}, b.createReply(req))
	})

	// The same key with a different request, for each fingerprinted field.
	edits := []func(*protocol.CreateJobRequest){
		// Another service, with a param it declares.
		func(r *protocol.CreateJobRequest) { r.Service, r.Params = svc720p, map[string]string{"preset": "fast"} },
		func(r *protocol.CreateJobRequest) { r.Params = map[string]string{"seed": "ultrafast"} },
		func(r *protocol.CreateJobRequest) { r.MaxAttempts = 2 },
		func(r *protocol.CreateJobRequest) { r.AdmissionWindow = 2 * time.Hour },
	}
	if b.opts.RawRequests {
		edits = append(edits, func(r *protocol.CreateJobRequest) { r.Input.URL = "https://in.example/y" })
	}
	for _, edit := range edits {
		other := req
		edit(&other)
		b.unchanged(func() {
			require.Equal(t, protocol.Reply{Code: protocol.CodeIdempotencyConflict}, b.createReply(other))
		})
	}
	require.Len(t, b.snapshot().Jobs, 5)

	// Keys are per buyer.
	rich := request(buyerRich, svcSynthetic)
	rich.IdempotencyKey = "order-1"
	require.NotEqual(t, id, b.create(rich))
}
