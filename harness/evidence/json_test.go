package evidence

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func renderJSON(t *testing.T, c Card, o WriteOptions) string {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, WriteJSON(&buf, c, o))
	return buf.String()
}

func TestJSONRoundTrip(t *testing.T) {
	t.Parallel()
	want := sampleCard(false)
	js := renderJSON(t, want, WriteOptions{})
	require.True(t, strings.HasSuffix(js, "}\n"), "trailing newline")
	got, err := ReadJSON(strings.NewReader(js))
	require.NoError(t, err)
	// Invariants are written in number order; everything else as given.
	want.Invariants[0], want.Invariants[1] = want.Invariants[1], want.Invariants[0]
	require.Equal(t, want, got)
	require.Equal(t, js, renderJSON(t, got, WriteOptions{}), "rewriting a read card changes nothing")
}

func TestJSONStable(t *testing.T) {
	t.Parallel()
	js := renderJSON(t, sampleCard(false), WriteOptions{})
	require.Equal(t, js, renderJSON(t, sampleCard(true), WriteOptions{}))
	// Fields follow card.go's declaration order.
	require.Regexp(t, `(?s)^\{\n  "title": .*\n  "date": .*\n  "passed": .*\n  "run": \{`, js)
	require.Contains(t, js, `"replies": {
        "COMMITTED": 412,
        "EPOCH_MISMATCH": 37,`)
}

func TestJSONEmptyCollectionsAreArrays(t *testing.T) {
	t.Parallel()
	c := Card{Date: "2025-12-02", Passed: true, Campaigns: []Campaign{{Name: "c", Passed: true}}}
	js := renderJSON(t, c, WriteOptions{})
	require.Contains(t, js, `"failures": []`)
	require.Contains(t, js, `"replies": {}`)
	require.NotContains(t, js, "null")
	got, err := ReadJSON(strings.NewReader(js))
	require.NoError(t, err)
	require.Equal(t, js, renderJSON(t, got, WriteOptions{}))
	require.Nil(t, c.Failures, "the caller's card is not modified")
}

func TestJSONNoTimings(t *testing.T) {
	t.Parallel()
	js := renderJSON(t, sampleCard(false), WriteOptions{NoTimings: true})
	require.NotRegexp(t, regexp.MustCompile(`"duration_ms": [^0]`), js)
	require.Contains(t, js, `"no_timings": true`)
	got, err := ReadJSON(strings.NewReader(js))
	require.NoError(t, err)
	// The card remembers it is timing-free, so every later format is too.
	var md bytes.Buffer
	require.NoError(t, WriteMarkdown(&md, got, WriteOptions{}))
	require.NotContains(t, md.String(), "Duration")
}

func TestReadJSONErrors(t *testing.T) {
	t.Parallel()
	valid := renderJSON(t, sampleCard(false), WriteOptions{})
	for name, tc := range map[string]struct{ in, want string }{
		"unknown field": {strings.Replace(valid, `"host":`, `"hostname":`, 1), `unknown field "hostname"`},
		"wrong type":    {strings.Replace(valid, `"seeds": 200`, `"seeds": "200"`, 1), "Campaign.campaigns.seeds of type int (line "},
		"syntax":        {"{\n  \"title\": ,\n}", "line 2, column"},
		"truncated":     {valid[:len(valid)/2], "truncated JSON"},
		"trailing data": {valid + "{}", "unexpected data after the card"},
		"empty":         {"  \n", "empty input"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := ReadJSON(strings.NewReader(tc.in))
			require.ErrorContains(t, err, "read evidence card: ")
			require.ErrorContains(t, err, tc.want)
		})
	}
}
