package protocol

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const (
	tJob     = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
	tAttempt = "11111111-2222-4333-8444-555555555555"
	tToken   = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
)

var tSHA = strings.Repeat("ab", 32)

// agentFrame returns a fresh, valid JSON object of each agent message type,
// with the field lists of SPEC section 5.
func agentFrame(typ string) map[string]any {
	switch typ {
	case "hello":
		return map[string]any{"type": "hello", "agent_version": "1.2.3", "services": []any{"synthetic.mp4", "ffmpeg.h264_720p"}, "slots_total": 4, "slots_free": 3}
	case "slots":
		return map[string]any{"type": "slots", "slots_free": 2}
	case "progress":
		return map[string]any{"type": "progress", "job_id": tJob, "attempt_id": tAttempt, "lease_epoch": 1, "phase": "running"}
	case "fail":
		return map[string]any{"type": "fail", "job_id": tJob, "attempt_id": tAttempt, "lease_epoch": 2, "commit_token": tToken, "failure_code": "download_failed", "message": "404 from input url"}
	case "commit":
		return map[string]any{"type": "commit", "job_id": tJob, "attempt_id": tAttempt, "lease_epoch": 3, "commit_token": tToken,
			"output": map[string]any{"key": OutputKey(tJob, tAttempt), "bytes": 1234, "sha256": tSHA}}
	}
	panic(typ)
}

var agentTypes = []string{"hello", "slots", "progress", "fail", "commit"}

// The decoded value each agentFrame must produce.
func agentWant(typ string) any {
	switch typ {
	case "hello":
		return &Hello{Type: "hello", AgentVersion: "1.2.3", Services: []string{"synthetic.mp4", "ffmpeg.h264_720p"}, SlotsTotal: 4, SlotsFree: 3}
	case "slots":
		return &Slots{Type: "slots", SlotsFree: 2}
	case "progress":
		return &Progress{Type: "progress", JobID: tJob, AttemptID: tAttempt, LeaseEpoch: 1, Phase: AttemptRunning}
	case "fail":
		return &Fail{Type: "fail", JobID: tJob, AttemptID: tAttempt, LeaseEpoch: 2, CommitToken: tToken, FailureCode: FailDownloadFailed, Message: "404 from input url"}
	case "commit":
		return &Commit{Type: "commit", JobID: tJob, AttemptID: tAttempt, LeaseEpoch: 3, CommitToken: tToken,
			Output: Output{Key: OutputKey(tJob, tAttempt), Bytes: 1234, SHA256: tSHA}}
	}
	panic(typ)
}

// SPEC section 5's required fields of each agent message, nested ones dotted.
// fail.message is human text and may be absent.
var agentRequired = map[string][]string{
	"hello":    {"agent_version", "services", "slots_total", "slots_free"},
	"slots":    {"slots_free"},
	"progress": {"job_id", "attempt_id", "lease_epoch", "phase"},
	"fail":     {"job_id", "attempt_id", "lease_epoch", "commit_token", "failure_code"},
	"commit":   {"job_id", "attempt_id", "lease_epoch", "commit_token", "output", "output.key", "output.bytes", "output.sha256"},
}

// set sets (or with del, deletes) a dotted path in a frame.
func set(m map[string]any, path string, v any, del bool) map[string]any {
	name, rest, nested := strings.Cut(path, ".")
	if nested {
		set(m[name].(map[string]any), rest, v, del)
		return m
	}
	if del {
		delete(m, name)
	} else {
		m[name] = v
	}
	return m
}

func with(m map[string]any, path string, v any) map[string]any { return set(m, path, v, false) }
func without(m map[string]any, path string) map[string]any     { return set(m, path, nil, true) }

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

// requireDecodeError asserts err is a *DecodeError naming field.
func requireDecodeError(t *testing.T, err error, field string, msgAndArgs ...any) *DecodeError {
	t.Helper()
	require.Error(t, err, msgAndArgs...)
	var de *DecodeError
	require.ErrorAs(t, err, &de, msgAndArgs...)
	require.Equal(t, field, de.Field, append([]any{"reason: %s"}, de.Reason)...)
	if field != "" {
		require.Contains(t, de.Error(), `"`+field+`"`)
	}
	require.True(t, strings.HasPrefix(de.Error(), "bad message: "), de.Error())
	return de
}

func TestDecodeAgentFrameValid(t *testing.T) {
	t.Parallel()
	for _, typ := range agentTypes {
		t.Run(typ, func(t *testing.T) {
			t.Parallel()
			got, err := DecodeAgentFrame(mustJSON(t, agentFrame(typ)))
			require.NoError(t, err)
			require.Equal(t, agentWant(typ), got)

			// Encode -> decode is the identity.
			again, err := DecodeAgentFrame(Encode(got))
			require.NoError(t, err)
			require.Equal(t, got, again)
			again, err = DecodeAgentFrame(Encode(agentWant(typ)))
			require.NoError(t, err)
			require.Equal(t, agentWant(typ), again)

			// Agent frames are not gateway frames.
			_, err = DecodeGatewayFrame(mustJSON(t, agentFrame(typ)))
			requireDecodeError(t, err, "type")
		})
	}
}

func TestDecodeAgentFrameOptionalAndEdgeValues(t *testing.T) {
	t.Parallel()
	ok := func(m map[string]any) any {
		t.Helper()
		v, err := DecodeAgentFrame(mustJSON(t, m))
		require.NoError(t, err, string(mustJSON(t, m)))
		return v
	}
	// Every lease phase is a valid progress phase.
	for _, ph := range []string{"leased", "downloading", "running", "uploading"} {
		require.Equal(t, AttemptStatus(ph), ok(with(agentFrame("progress"), "phase", ph)).(*Progress).Phase)
	}
	require.Equal(t, 0, ok(with(agentFrame("slots"), "slots_free", 0)).(*Slots).SlotsFree)
	require.Equal(t, 64, ok(with(agentFrame("slots"), "slots_free", 64)).(*Slots).SlotsFree)
	h := ok(with(with(agentFrame("hello"), "slots_total", 64), "slots_free", 64)).(*Hello)
	require.Equal(t, 64, h.SlotsFree)
	require.Equal(t, 0, ok(with(with(agentFrame("hello"), "slots_total", 1), "slots_free", 0)).(*Hello).SlotsFree)
	require.Equal(t, 1<<40, ok(with(agentFrame("progress"), "lease_epoch", 1<<40)).(*Progress).LeaseEpoch)
	require.Equal(t, int64(0), ok(with(agentFrame("commit"), "output.bytes", 0)).(*Commit).Output.Bytes)
	long := strings.Repeat("t", 128)
	require.Equal(t, long, ok(with(agentFrame("commit"), "commit_token", long)).(*Commit).CommitToken)
	require.Equal(t, long, ok(with(agentFrame("fail"), "commit_token", long)).(*Fail).CommitToken)
	msg := strings.Repeat("m", 4096)
	require.Equal(t, msg, ok(with(agentFrame("fail"), "message", msg)).(*Fail).Message)
	require.Equal(t, "", ok(with(agentFrame("fail"), "message", "")).(*Fail).Message)
	// Key order and whitespace do not matter.
	v, err := DecodeAgentFrame([]byte(" {\n\t\"slots_free\" : 5 ,\"type\":\"slots\"}\n"))
	require.NoError(t, err)
	require.Equal(t, &Slots{Type: "slots", SlotsFree: 5}, v)
}

func TestDecodeUnknownFailureCodeIsAccepted(t *testing.T) {
	t.Parallel()
	// Decoding leaves the code to the service layer, which answers bad_failure_code.
	for _, code := range []string{"bogus_code", "admission_expired", "NO_CAPACITY", "x"} {
		v, err := DecodeAgentFrame(mustJSON(t, with(agentFrame("fail"), "failure_code", code)))
		require.NoError(t, err, code)
		f := v.(*Fail)
		require.Equal(t, FailureCode(code), f.FailureCode)
		require.False(t, f.FailureCode.Valid(), code)
	}
	for _, code := range FailureCodes {
		v, err := DecodeAgentFrame(mustJSON(t, with(agentFrame("fail"), "failure_code", string(code))))
		require.NoError(t, err)
		require.Equal(t, code, v.(*Fail).FailureCode)
	}
}

func TestDecodeMalformedJSON(t *testing.T) {
	t.Parallel()
	for _, s := range []string{
		``, ` `, `{`, `}`, `{"type":"slots"`, `{"type":"slots",}`, `{'type':'slots'}`, `[]`, `[{"type":"slots","slots_free":1}]`,
		`"slots"`, `1`, `true`, `{type:"slots"}`, `{"type":"slots","slots_free":1} x`,
		`{"type":"slots","slots_free":1}{"type":"slots","slots_free":1}`, "\xff", `{"type":"slots","slots_free":01}`,
	} {
		_, err := DecodeAgentFrame([]byte(s))
		de := requireDecodeError(t, err, "", "%q", s)
		require.Contains(t, de.Reason, "malformed JSON", s)
		_, err = DecodeGatewayFrame([]byte(s))
		requireDecodeError(t, err, "", "%q", s)
	}
}

func TestDecodeTypeField(t *testing.T) {
	t.Parallel()
	for _, s := range []string{`{}`, `null`, `{"slots_free":1}`, `{"type":null,"slots_free":1}`, `{"Type":"slots","slots_free":1}`} {
		_, err := DecodeAgentFrame([]byte(s))
		de := requireDecodeError(t, err, "type", s)
		require.Equal(t, "missing", de.Reason, s)
	}
	for _, s := range []string{
		`{"type":"bogus"}`, `{"type":""}`, `{"type":"Slots","slots_free":1}`, `{"type":"slots ","slots_free":1}`,
		`{"type":5}`, `{"type":["slots"]}`, `{"type":{"slots":1}}`, `{"type":true}`,
		// Gateway messages are not agent messages.
		`{"type":"welcome","device_id":"d","lease_ttl_ms":1,"heartbeat_ms":1}`, `{"type":"error","code":"x","message":"y"}`,
	} {
		_, err := DecodeAgentFrame([]byte(s))
		requireDecodeError(t, err, "type", s)
	}
}

func TestDecodeMissingRequiredField(t *testing.T) {
	t.Parallel()
	for _, typ := range agentTypes {
		for _, f := range agentRequired[typ] {
			t.Run(typ+"/"+f, func(t *testing.T) {
				t.Parallel()
				_, err := DecodeAgentFrame(mustJSON(t, without(agentFrame(typ), f)))
				de := requireDecodeError(t, err, f, "absent")
				require.Equal(t, "missing", de.Reason)

				_, err = DecodeAgentFrame(mustJSON(t, with(agentFrame(typ), f, nil)))
				de = requireDecodeError(t, err, f, "null")
				require.Equal(t, "missing", de.Reason)

				// A case variant of the key does not stand in for it.
				m := without(agentFrame(typ), f)
				name, rest, nested := strings.Cut(f, ".")
				if nested {
					m[name].(map[string]any)[strings.ToUpper(rest)] = agentFrame(typ)[name].(map[string]any)[rest]
				} else {
					m[strings.ToUpper(f)] = agentFrame(typ)[f]
				}
				_, err = DecodeAgentFrame(mustJSON(t, m))
				requireDecodeError(t, err, f, "upper-case key")
			})
		}
	}
	// Only the listed fields are required: fail without message is fine.
	_, err := DecodeAgentFrame(mustJSON(t, without(agentFrame("fail"), "message")))
	require.NoError(t, err)
	// The first missing field in SPEC order is the one named.
	_, err = DecodeAgentFrame([]byte(`{"type":"progress"}`))
	requireDecodeError(t, err, "job_id")
	_, err = DecodeAgentFrame([]byte(`{"type":"commit","job_id":"` + tJob + `","attempt_id":"` + tAttempt + `","lease_epoch":1,"commit_token":"t","output":{}}`))
	requireDecodeError(t, err, "output.key")
}

func TestDecodeWrongTypedField(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		typ, field string
		value      any
	}{
		{"hello", "agent_version", 1},
		{"hello", "agent_version", []any{"1"}},
		{"hello", "services", "synthetic.mp4"},
		{"hello", "services", map[string]any{"a": 1}},
		{"hello", "services", []any{1}},
		{"hello", "services", []any{"ok", true}},
		{"hello", "slots_total", "4"},
		{"hello", "slots_total", 4.5},
		{"hello", "slots_free", true},
		{"slots", "slots_free", "2"},
		{"slots", "slots_free", []any{2}},
		{"slots", "slots_free", 1e300},
		{"progress", "job_id", 5},
		{"progress", "attempt_id", false},
		{"progress", "lease_epoch", "1"},
		{"progress", "lease_epoch", 1.5},
		{"progress", "lease_epoch", map[string]any{}},
		{"progress", "phase", 3},
		{"fail", "commit_token", 12345},
		{"fail", "failure_code", 5},
		{"fail", "message", map[string]any{"m": "x"}},
		{"fail", "lease_epoch", "2"},
		{"commit", "output", "outputs/x.mp4"},
		{"commit", "output", []any{}},
		{"commit", "output.key", 1},
		{"commit", "output.bytes", "1234"},
		{"commit", "output.bytes", -1.5},
		{"commit", "output.sha256", 1},
		{"commit", "commit_token", []any{"a"}},
	} {
		_, err := DecodeAgentFrame(mustJSON(t, with(agentFrame(c.typ), c.field, c.value)))
		requireDecodeError(t, err, c.field, "%s.%s = %#v", c.typ, c.field, c.value)
	}
	// Numbers too large for the Go type are wrong-typed, not wrapped.
	_, err := DecodeAgentFrame([]byte(`{"type":"progress","job_id":"` + tJob + `","attempt_id":"` + tAttempt + `","lease_epoch":99999999999999999999,"phase":"running"}`))
	requireDecodeError(t, err, "lease_epoch")
}

func TestDecodeUnknownField(t *testing.T) {
	t.Parallel()
	for _, typ := range agentTypes {
		_, err := DecodeAgentFrame(mustJSON(t, with(agentFrame(typ), "extra", 1)))
		de := requireDecodeError(t, err, "extra", typ)
		require.Equal(t, "unknown field", de.Reason)
		_, err = DecodeAgentFrame(mustJSON(t, with(agentFrame(typ), "surprise", nil)))
		requireDecodeError(t, err, "surprise", typ)
		// Keys are case-sensitive: a case variant of a real field is unknown,
		// even when it would otherwise override the real one.
		_, err = DecodeAgentFrame(mustJSON(t, with(agentFrame(typ), "TYPE", typ)))
		requireDecodeError(t, err, "TYPE", typ)
	}
	_, err := DecodeAgentFrame(mustJSON(t, with(agentFrame("commit"), "output.extra", "x")))
	requireDecodeError(t, err, "output.extra")
	_, err = DecodeAgentFrame(mustJSON(t, with(agentFrame("commit"), "output.Key", "x")))
	requireDecodeError(t, err, "output.Key")
	// Fields of other messages are unknown here.
	_, err = DecodeAgentFrame(mustJSON(t, with(agentFrame("slots"), "slots_total", 4)))
	requireDecodeError(t, err, "slots_total")
	_, err = DecodeAgentFrame(mustJSON(t, with(agentFrame("progress"), "commit_token", tToken)))
	requireDecodeError(t, err, "commit_token")
	_, err = DecodeAgentFrame(mustJSON(t, with(agentFrame("progress"), "message", "")))
	requireDecodeError(t, err, "message")
	_, err = DecodeAgentFrame(mustJSON(t, with(agentFrame("commit"), "failure_code", "runner_failed")))
	requireDecodeError(t, err, "failure_code")
}

// A frame cannot claim one type and smuggle another through a case variant
// of "type": encoding/json matches keys case-insensitively, which used to
// yield a *Hello whose Type was "slots".
func TestDecodeTypeCannotBeOverridden(t *testing.T) {
	t.Parallel()
	for _, s := range []string{
		`{"type":"hello","Type":"slots","agent_version":"1","services":["a"],"slots_total":1,"slots_free":1}`,
		`{"Type":"slots","type":"hello","agent_version":"1","services":["a"],"slots_total":1,"slots_free":1}`,
	} {
		_, err := DecodeAgentFrame([]byte(s))
		requireDecodeError(t, err, "Type", s)
	}
	_, err := DecodeAgentFrame([]byte(`{"type":"slots","slots_free":1,"SLOTS_FREE":70}`))
	requireDecodeError(t, err, "SLOTS_FREE")
	_, err = DecodeAgentFrame([]byte(`{"type":"slots","slots_free":1,"Slots_Free":null}`))
	requireDecodeError(t, err, "Slots_Free")
}

func TestDecodeOutOfRange(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		typ, field string
		value      any
	}{
		{"progress", "lease_epoch", 0},
		{"progress", "lease_epoch", -1},
		{"fail", "lease_epoch", 0},
		{"commit", "lease_epoch", -7},
		{"progress", "job_id", "not-a-uuid"},
		{"progress", "job_id", ""},
		{"progress", "job_id", strings.ToUpper(tJob)},
		{"fail", "job_id", tJob + "0"},
		{"commit", "job_id", strings.ReplaceAll(tJob, "-", "")},
		{"progress", "attempt_id", "x"},
		{"fail", "attempt_id", ""},
		{"commit", "attempt_id", "{" + tAttempt[1:35] + "}"},
		{"progress", "phase", "committing"},
		{"progress", "phase", "succeeded"},
		{"progress", "phase", "failed"},
		{"progress", "phase", "lost"},
		{"progress", "phase", "cancelled"},
		{"progress", "phase", ""},
		{"progress", "phase", "Running"},
		{"progress", "phase", "queued"},
		{"hello", "agent_version", ""},
		{"hello", "services", []any{}},
		{"hello", "services[1]", nil}, // services: ["synthetic.mp4", ""]
		{"hello", "slots_total", 0},
		{"hello", "slots_total", -1},
		{"hello", "slots_total", 65},
		{"hello", "slots_free", 5}, // > slots_total 4
		{"hello", "slots_free", -1},
		{"slots", "slots_free", -1},
		{"slots", "slots_free", 65},
		{"fail", "commit_token", ""},
		{"fail", "commit_token", strings.Repeat("t", 129)},
		{"commit", "commit_token", ""},
		{"commit", "commit_token", strings.Repeat("t", 129)},
		{"commit", "commit_token", strings.Repeat("t", ReadLimitBytes)},
		{"fail", "failure_code", ""},
		{"fail", "message", strings.Repeat("m", 4097)},
		{"commit", "output.key", ""},
		{"commit", "output.bytes", -1},
		{"commit", "output.sha256", ""},
		{"commit", "output.sha256", "not-hex"},
		{"commit", "output.sha256", strings.ToUpper(tSHA)},
		{"commit", "output.sha256", tSHA[:63]},
		{"commit", "output.sha256", tSHA + "a"},
		{"commit", "output.sha256", strings.Repeat("g", 64)},
	} {
		m := agentFrame(c.typ)
		if c.field == "services[1]" {
			m["services"] = []any{"synthetic.mp4", ""}
		} else {
			m = with(m, c.field, c.value)
		}
		_, err := DecodeAgentFrame(mustJSON(t, m))
		requireDecodeError(t, err, c.field, "%s.%s = %.40v", c.typ, c.field, c.value)
	}
	// The first identity field that is wrong is the one named.
	_, err := DecodeAgentFrame(mustJSON(t, with(with(agentFrame("progress"), "job_id", "x"), "lease_epoch", 0)))
	requireDecodeError(t, err, "job_id")
	// slots_free is bounded by the slots_total of the same frame.
	_, err = DecodeAgentFrame(mustJSON(t, with(with(agentFrame("hello"), "slots_total", 2), "slots_free", 3)))
	requireDecodeError(t, err, "slots_free")
}

func TestDecodeErrorMessage(t *testing.T) {
	t.Parallel()
	require.Equal(t, "bad message: malformed JSON: x", (&DecodeError{Reason: "malformed JSON: x"}).Error())
	require.Equal(t, `bad message: field "lease_epoch": must be >= 1, got 0`, (&DecodeError{Field: "lease_epoch", Reason: "must be >= 1, got 0"}).Error())
	_, err := DecodeAgentFrame(mustJSON(t, with(agentFrame("progress"), "lease_epoch", 0)))
	require.EqualError(t, err, `bad message: field "lease_epoch": must be >= 1, got 0`)
}

func TestEncodePanicsOnUnencodable(t *testing.T) {
	t.Parallel()
	require.Panics(t, func() { Encode(func() {}) })
	require.Panics(t, func() { Encode(map[string]any{"c": make(chan int)}) })
}

// gatewayMessages returns a fresh valid frame of each gateway message type and
// the value it decodes to.
func gatewayMessages() map[string]any {
	exp := time.Date(2026, 3, 4, 5, 6, 7, 891011000, time.UTC)
	return map[string]any{
		"welcome": &Welcome{Type: "welcome", DeviceID: "dev-1", LeaseTTLMs: 30000, HeartbeatMs: 5000},
		"lease_offer": &LeaseOffer{Type: "lease_offer", JobID: tJob, AttemptID: tAttempt, AttemptNumber: 2, LeaseEpoch: 1,
			CommitToken: tToken, LeaseExpiresAt: exp, Service: "synthetic.mp4", Params: map[string]string{"seconds": "2"},
			Input:  InputRef{URL: "https://s3.example/inputs/x", Bytes: 10, SHA256: tSHA},
			Output: OutputGrant{Key: OutputKey(tJob, tAttempt), UploadURL: "https://s3.example/put"}},
		"progress_ok":     &ProgressOK{Type: "progress_ok", JobID: tJob, AttemptID: tAttempt, LeaseExpiresAt: exp},
		"lease_conflict":  &LeaseConflict{Type: "lease_conflict", JobID: tJob, AttemptID: tAttempt, Reason: ReasonPhaseRegression},
		"cancel":          &Cancel{Type: "cancel", JobID: tJob, AttemptID: tAttempt},
		"drain":           &Drain{Type: "drain"},
		"commit_ok":       &CommitOK{Type: "commit_ok", JobID: tJob, AttemptID: tAttempt},
		"commit_rejected": &CommitRejected{Type: "commit_rejected", JobID: tJob, AttemptID: tAttempt, Code: CodeJobCancelled, Message: "cancelled"},
		"fail_ok":         &FailOK{Type: "fail_ok", JobID: tJob, AttemptID: tAttempt, Requeued: true},
		"fail_rejected":   &FailRejected{Type: "fail_rejected", JobID: tJob, AttemptID: tAttempt, Code: CodeFailConflict},
		"error":           &ErrorMessage{Type: "error", Code: CodeBadMessage, Message: "bad message"},
	}
}

func TestDecodeGatewayFrameRoundTrip(t *testing.T) {
	t.Parallel()
	for typ, msg := range gatewayMessages() {
		got, err := DecodeGatewayFrame(Encode(msg))
		require.NoError(t, err, typ)
		require.Equal(t, msg, got, typ)
		_, err = DecodeAgentFrame(Encode(msg))
		requireDecodeError(t, err, "type", typ)
	}
}

func TestDecodeGatewayFrameErrors(t *testing.T) {
	t.Parallel()
	frame := func(typ string) map[string]any {
		var m map[string]any
		require.NoError(t, json.Unmarshal(Encode(gatewayMessages()[typ]), &m))
		return m
	}
	for _, c := range []struct {
		typ, field string
		value      any
		del        bool
	}{
		{"welcome", "device_id", "", false},
		{"welcome", "lease_ttl_ms", 0, false},
		{"welcome", "heartbeat_ms", 0, false},
		{"welcome", "heartbeat_ms", -5, false},
		{"welcome", "heartbeat_ms", nil, true},
		{"lease_offer", "lease_epoch", 0, false},
		{"lease_offer", "attempt_number", 0, false},
		{"lease_offer", "commit_token", "", false},
		{"lease_offer", "service", "", false},
		{"lease_offer", "job_id", "x", false},
		{"lease_offer", "lease_expires_at", "tomorrow", false},
		{"lease_offer", "lease_expires_at", 17, false},
		{"lease_offer", "lease_expires_at", nil, true},
		{"lease_offer", "input", nil, true},
		{"lease_offer", "input.sha256", nil, true},
		{"lease_offer", "input.bytes", "10", false},
		{"lease_offer", "output.upload_url", nil, true},
		{"lease_offer", "output.extra", 1, false},
		{"lease_offer", "params", "seconds=2", false},
		{"lease_offer", "extra", 1, false},
		{"progress_ok", "lease_expires_at", "2026-13-01T00:00:00Z", false},
		{"fail_ok", "requeued", "true", false},
		{"fail_ok", "requeued", nil, true},
		{"commit_rejected", "code", nil, true},
		{"error", "message", nil, true},
	} {
		m := set(frame(c.typ), c.field, c.value, c.del)
		_, err := DecodeGatewayFrame(mustJSON(t, m))
		requireDecodeError(t, err, c.field, "%s.%s = %v (del %v)", c.typ, c.field, c.value, c.del)
	}
	// params is optional.
	m := frame("lease_offer")
	delete(m, "params")
	v, err := DecodeGatewayFrame(mustJSON(t, m))
	require.NoError(t, err)
	require.Nil(t, v.(*LeaseOffer).Params)
}
