package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// encodedFrames is one frame of every message type of both directions, as
// Encode writes it (type first), with its spec set.
func encodedFrames(t require.TestingT) []specFrame {
	var out []specFrame
	for _, typ := range agentTypes {
		out = append(out, specFrame{agentFrames, Encode(agentWant(typ))})
	}
	for _, msg := range gatewayMessages() {
		out = append(out, specFrame{gatewayFrames, Encode(msg)})
	}
	return out
}

type specFrame struct {
	specs map[string]frameSpec
	data  []byte
}

// The fast path takes every frame Encode writes, so it is the path real
// agents and gateways meet, and gives decodeStrict's message.
func TestDecodeFastTakesEncodedFrames(t *testing.T) {
	t.Parallel()
	for _, f := range encodedFrames(t) {
		got, ok := decodeFast(f.data, f.specs)
		require.True(t, ok, "%s", f.data)
		want, err := decodeStrict(f.data, f.specs)
		require.NoError(t, err)
		require.Equal(t, want, got)
	}
}

// The frames the fast path must leave to decodeStrict, one per rule it
// checks, each a commit that is otherwise as Encode writes it.
func TestDecodeFastLeavesTheRestToStrict(t *testing.T) {
	t.Parallel()
	ok := string(Encode(agentWant("commit")))
	require.True(t, strings.HasPrefix(ok, `{"type":"commit","job_id":`), ok)
	for what, frame := range map[string]string{
		"type not first":         strings.Replace(ok, `"type":"commit","job_id":"`+tJob+`"`, `"job_id":"`+tJob+`","type":"commit"`, 1),
		"a name twice":           strings.Replace(ok, `"lease_epoch":3`, `"lease_epoch":3,"lease_epoch":3`, 1),
		"a nested name twice":    strings.Replace(ok, `"bytes":1234`, `"bytes":1234,"bytes":1234`, 1),
		"a name in another case": strings.Replace(ok, `"lease_epoch"`, `"LEASE_EPOCH"`, 1),
		"an escaped name":        strings.Replace(ok, `"lease_epoch"`, `"\u006cease_epoch"`, 1),
		"an unknown name":        strings.Replace(ok, `"lease_epoch":3`, `"lease_epoch":3,"extra":1`, 1),
		"a required null":        strings.Replace(ok, `"lease_epoch":3`, `"lease_epoch":null`, 1),
		"a required nested null": strings.Replace(ok, `"bytes":1234`, `"bytes":null`, 1),
		"a required path absent": strings.Replace(ok, `"commit_token":"`+tToken+`",`, ``, 1),
		"trailing data":          ok + `x`,
		"an escaped type":        strings.Replace(ok, `"type":"commit"`, `"type":"\u0063ommit"`, 1),
	} {
		require.NotEqual(t, ok, frame, what)
		_, fast := decodeFast([]byte(frame), agentFrames)
		require.False(t, fast, "%s: %s", what, frame)
		requireFastAgrees(t, agentFrames, []byte(frame))
	}
}

// requireFastAgrees is the fast path's contract on one frame: when it
// vouches for the frame, decodeStrict accepts it with an equal message;
// and decodeFrame answers exactly as decodeStrict does.
func requireFastAgrees(t require.TestingT, specs map[string]frameSpec, data []byte) (fast, strict bool) {
	got, ok := decodeFast(data, specs)
	want, err := decodeStrict(data, specs)
	if ok {
		require.NoError(t, err, "the fast path took a frame decodeStrict refuses: %s", data)
		require.Equal(t, want, got, "%s", data)
	}
	frame, ferr := decodeFrame(data, specs)
	require.Equal(t, fmt.Sprint(err), fmt.Sprint(ferr), "%s", data)
	require.Equal(t, want, frame, "%s", data)
	return ok, err == nil
}

// TestDecodeFastAgreesWithStrict mutates encoded frames the ways a peer
// could get one wrong (a member dropped, nulled, repeated, moved, renamed
// in another case or with an escape, an unknown member, a value of
// another kind, inside the nested objects too, trailing data, invalid
// UTF-8) and holds the fast path to decodeStrict on each.
func TestDecodeFastAgreesWithStrict(t *testing.T) {
	t.Parallel()
	frames := encodedFrames(t)
	var fastTook, strictTook, strictRefused atomic.Int64
	rapid.Check(t, func(rt *rapid.T) {
		f := rapid.SampledFrom(frames).Draw(rt, "frame")
		obj := parseMembers(rt, f.data)
		for i := range rapid.IntRange(0, 3).Draw(rt, "mutations") {
			obj = mutate(rt, obj, fmt.Sprint(i))
		}
		data := []byte(renderMembers(obj))
		if rapid.IntRange(0, 15).Draw(rt, "wrap") == 0 {
			data = append([]byte(" "), append(data, rapid.SampledFrom([]string{" ", "x", "{}", "\n"}).Draw(rt, "tail")...)...)
		}
		fast, strict := requireFastAgrees(rt, f.specs, data)
		switch {
		case fast:
			fastTook.Add(1)
		case strict:
			strictTook.Add(1)
		default:
			strictRefused.Add(1)
		}
	})
	// Both outcomes must occur, or the property says nothing.
	require.Positive(t, fastTook.Load(), "no mutated frame was taken by the fast path")
	require.Positive(t, strictRefused.Load(), "no mutated frame was refused")
	t.Logf("fast path took %d, decodeStrict alone took %d, refused %d", fastTook.Load(), strictTook.Load(), strictRefused.Load())
}

// FuzzDecodeFastAgreesWithStrict is the same contract on any bytes.
func FuzzDecodeFastAgreesWithStrict(f *testing.F) {
	for _, fr := range encodedFrames(f) {
		f.Add(fr.data)
	}
	f.Add([]byte(`{"type":"slots","slots_free":1,"SLOTS_FREE":2}`))
	f.Add([]byte(`{"type":"commit","job_id":"` + tJob + `","attempt_id":"` + tAttempt + `","lease_epoch":1,"commit_token":"t","output":{"key":"k","bytes":0,"sha256":"` + tSHA + `","KEY":"x"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		requireFastAgrees(t, agentFrames, data)
		requireFastAgrees(t, gatewayFrames, data)
	})
}

// member is one object member as raw JSON text: its quoted name and its
// value, or its members when the value is an object.
type member struct {
	name, value string
	obj         []member
}

func parseMembers(t require.TestingT, data []byte) []member {
	dec := json.NewDecoder(bytes.NewReader(data))
	_, err := dec.Token() // {
	require.NoError(t, err)
	return readMembers(t, dec)
}

func readMembers(t require.TestingT, dec *json.Decoder) []member {
	var out []member
	for dec.More() {
		name, err := dec.Token()
		require.NoError(t, err)
		var raw json.RawMessage
		require.NoError(t, dec.Decode(&raw))
		m := member{name: fmt.Sprintf("%q", name)}
		if len(raw) > 0 && raw[0] == '{' {
			m.obj = parseMembers(t, raw)
			if m.obj == nil {
				m.obj = []member{}
			}
		} else {
			m.value = string(raw)
		}
		out = append(out, m)
	}
	_, err := dec.Token() // }
	require.NoError(t, err)
	return out
}

func renderMembers(obj []member) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, m := range obj {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(m.name + ":")
		if m.obj != nil {
			b.WriteString(renderMembers(m.obj))
		} else {
			b.WriteString(m.value)
		}
	}
	b.WriteByte('}')
	return b.String()
}

var otherValues = []string{`"x"`, `""`, `0`, `1`, `-1`, `1.5`, `1e400`, `true`, `null`, `[]`, `["a"]`, `{}`,
	`"2026-03-04T05:06:07Z"`, `"not a time"`, "\"\xff\"", `"\u00e9"`, `"running"`, `"synthetic.mp4"`,
	`"` + tJob + `"`, `"` + tSHA + `"`, `{"key":"k"}`}

// mutate applies one random change to obj (or to a nested object in it).
func mutate(t *rapid.T, obj []member, label string) []member {
	obj = append([]member(nil), obj...)
	if len(obj) == 0 {
		return append(obj, member{name: `"type"`, value: `"slots"`})
	}
	i := rapid.IntRange(0, len(obj)-1).Draw(t, "member"+label)
	m := obj[i]
	switch rapid.IntRange(0, 8).Draw(t, "op"+label) {
	case 0: // dropped
		return append(obj[:i], obj[i+1:]...)
	case 1: // null
		obj[i] = member{name: m.name, value: "null"}
	case 2: // repeated, with the same or another value
		dup := m
		if rapid.Bool().Draw(t, "sameValue"+label) {
			dup = member{name: m.name, value: rapid.SampledFrom(otherValues).Draw(t, "dupValue"+label)}
		}
		obj = append(obj, dup)
	case 3: // moved
		j := rapid.IntRange(0, len(obj)-1).Draw(t, "to"+label)
		obj[i], obj[j] = obj[j], obj[i]
	case 4: // renamed in another case
		obj[i].name = strings.ToUpper(m.name)
	case 5: // renamed with an escape for the same name
		if len(m.name) > 2 {
			obj[i].name = fmt.Sprintf(`"\u%04x%s`, m.name[1], m.name[2:])
		}
	case 6: // an unknown member
		obj = append(obj, member{name: rapid.SampledFrom([]string{`"extra"`, `"Type"`, `"key"`, `""`}).Draw(t, "unknown"+label),
			value: rapid.SampledFrom(otherValues).Draw(t, "unknownValue"+label)})
	case 7: // a value of another kind
		obj[i] = member{name: m.name, value: rapid.SampledFrom(otherValues).Draw(t, "value"+label)}
	case 8: // inside a nested object
		if m.obj != nil {
			obj[i].obj = mutate(t, m.obj, label+"."+m.name)
		}
	}
	return obj
}

// BenchmarkDecodeFrame is a lease offer (the largest frame) and a commit
// decoded, by the path every frame takes (fast) and by decodeStrict alone.
func BenchmarkDecodeFrame(b *testing.B) {
	offer := specFrame{gatewayFrames, Encode(gatewayMessages()["lease_offer"])}
	commit := specFrame{agentFrames, Encode(agentWant("commit"))}
	for _, c := range []struct {
		name   string
		decode func([]byte, map[string]frameSpec) (any, error)
	}{{"fast", decodeFrame}, {"strict", decodeStrict}} {
		for _, f := range []struct {
			name string
			specFrame
		}{{"lease_offer", offer}, {"commit", commit}} {
			b.Run(c.name+"/"+f.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := c.decode(f.data, f.specs); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
