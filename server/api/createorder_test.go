package api_test

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/api"
	"github.com/rendermac/rendermac/server/ratelimit"
)

// breach makes one field of a create request invalid over HTTP: body
// fields set to raw JSON (raw bytes, so a value may be invalid UTF-8), an
// Idempotency-Key, or an API key that names no buyer.
type breach struct {
	name       string
	body       map[string]string
	idemKey    string
	unknownKey bool
	// field, when set, is the name a 422 gives this breach instead of
	// apiField's (an uploaded input's refusals name input_id).
	field string
}

// breaches are the ways, over HTTP, to make each of protocol.CreateJobFields
// invalid, keyed by that field: wrong values, wrong JSON types and text the
// API cannot decode alike. The API computes input bytes and sha256 from
// input_base64, so both are made invalid the same way.
var breaches = map[string][]breach{
	"buyer": {{name: "unknown API key", unknownKey: true}},
	"service": {
		{name: "unknown", body: map[string]string{"service": `"nope"`}},
		{name: "not a string", body: map[string]string{"service": `5`}},
	},
	"max_attempts": {
		{name: "0", body: map[string]string{"max_attempts": `0`}},
		{name: "11", body: map[string]string{"max_attempts": `11`}},
		{name: "a string", body: map[string]string{"max_attempts": `"3"`}},
	},
	"admission_window": {
		{name: "0s", body: map[string]string{"admission_window_s": `0`}},
		{name: "7d+1s", body: map[string]string{"admission_window_s": `604801`}},
		{name: "overflowing", body: map[string]string{"admission_window_s": `9223372036854775807`}},
		{name: "a string", body: map[string]string{"admission_window_s": `"60"`}},
	},
	"input.bytes":  inputBreaches,
	"input.sha256": inputBreaches,
	"params": {
		{name: "bad key", body: map[string]string{"params": `{"Bad Key":"v"}`}},
		{name: "NUL", body: map[string]string{"params": `{"k":"a\u0000b"}`}},
		{name: "not UTF-8", body: map[string]string{"params": "{\"k\":\"a\xffb\"}"}},
		{name: "33 params", body: map[string]string{"params": manyParams(33)}},
		{name: "257-byte value", body: map[string]string{"params": `{"k":"` + strings.Repeat("v", 257) + `"}`}},
		{name: "not an object", body: map[string]string{"params": `5`}},
		{name: "value not a string", body: map[string]string{"params": `{"k":5}`}},
	},
	"idempotency_key": {
		{name: "201 bytes", idemKey: strings.Repeat("k", 201)},
		{name: "not UTF-8", idemKey: "key-\xff"},
	},
}

var inputBreaches = []breach{
	{name: "not base64", body: map[string]string{"input_base64": `"!!!"`}},
	{name: "not a string", body: map[string]string{"input_base64": `5`}},
	{name: "input_id not issued", body: map[string]string{"input_id": `"in_nope"`}, field: "input_id"},
	{name: "input_id not uploaded", field: "input_id",
		body: map[string]string{"input_id": `"in_` + strings.Repeat("A", 26) + `_5_` + strings.Repeat("ab", 32) + `"`}},
	{name: "input_id not a string", body: map[string]string{"input_id": `[]`}, field: "input_id"},
	{name: "both input fields", body: map[string]string{"input_base64": `"YQ=="`, "input_id": `"in_x"`}, field: "input_id"},
}

// apiField is the name a 422 gives each of protocol.CreateJobFields: the
// name the client sent. A "" is the unknown buyer, whose answer is 401.
var apiField = map[string]string{
	"buyer": "", "service": "service", "max_attempts": "max_attempts", "admission_window": "admission_window_s",
	"input.bytes": "input_base64", "input.sha256": "input_base64", "params": "params",
	"idempotency_key": "Idempotency-Key",
}

func manyParams(n int) string {
	kv := make([]string, n)
	for i := range kv {
		kv[i] = fmt.Sprintf(`"k%d":"v"`, i)
	}
	return "{" + strings.Join(kv, ",") + "}"
}

// TestCreateJobRefusesInTheContractsOrder: for every pair (a, b) of
// protocol.CreateJobFields with a before b, every request made invalid in
// both a and b, each in every way the table knows, is refused naming a
// (seed 89 of the three-way campaign: max_attempts 0 with a param that is
// not UTF-8 was answered params), and nothing is written.
func TestCreateJobRefusesInTheContractsOrder(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *api.Config) { c.Limits = ratelimit.Unlimited() })
	fields := protocol.CreateJobFields
	for _, f := range fields {
		require.NotEmpty(t, breaches[f], "no way to make %s invalid over HTTP", f)
	}
	check := func(want string, bs ...breach) {
		t.Helper()
		body := map[string]string{"service": `"synthetic.mp4"`, "params": `{"seed":"a"}`}
		key, idem := b.key, ""
		var names []string
		field := apiField[want]
		if bs[0].field != "" {
			field = bs[0].field
		}
		for _, br := range bs {
			maps.Copy(body, br.body)
			if br.idemKey != "" {
				idem = br.idemKey
			}
			if br.unknownKey {
				key = "rmk_names-no-buyer"
			}
			names = append(names, br.name)
		}
		var headers []string
		if idem != "" {
			headers = []string{"Idempotency-Key", idem}
		}
		keys := slices.Sorted(maps.Keys(body))
		for range 2 { // the body's order is not the contract's: both ways round
			var kv []string
			for _, k := range keys {
				kv = append(kv, fmt.Sprintf("%q:%s", k, body[k]))
			}
			r := b.createJob(t, key, "{"+strings.Join(kv, ",")+"}", headers...)
			msg := fmt.Sprintf("%s: want %s first; body: %s", strings.Join(names, " + "), want, r.Body)
			if field == "" {
				require.Equal(t, http.StatusUnauthorized, r.Status, msg)
			} else {
				require.Equal(t, http.StatusUnprocessableEntity, r.Status, msg)
				require.Equal(t, field, r.json(t)["field"], msg)
			}
			slices.Reverse(keys)
		}
	}
	for i, a := range fields {
		for _, ba := range breaches[a] {
			check(a, ba)
			for _, c := range fields[i+1:] {
				if apiField[c] == apiField[a] {
					continue // input.bytes and input.sha256 are both input_base64 over HTTP
				}
				for _, bc := range breaches[c] {
					check(a, ba, bc)
				}
			}
		}
	}
	require.Zero(t, b.count(t, `SELECT count(*) FROM jobs`))
	require.Zero(t, b.count(t, `SELECT count(*) FROM holds`))
	require.Equal(t, balance, b.count(t, `SELECT balance_cents FROM buyers WHERE id = $1`, buyerID))
}
