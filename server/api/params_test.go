package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/protocol/buyer"
)

// A param the service declares as integer, number or boolean may be sent
// as a JSON number or boolean; it is stored as the contract's text. A value
// that does not fit the declaration is refused on params, with a message
// naming the param, its declaration and the value.
func TestCreateJobTypedParams(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.createJob(t, b.key, `{"service":"ffmpeg.h264_720p","params":{"duration_s":2,"crf":20,"preset":"fast"}}`)
	require.Equal(t, http.StatusCreated, r.Status, "body: %s", r.Body)
	require.Equal(t, map[string]any{"duration_s": "2", "crf": "20", "preset": "fast"}, r.json(t)["params"])

	// A string holding the number is accepted as before.
	r = b.createJob(t, b.key, `{"service":"ffmpeg.h264_720p","params":{"duration_s":"3"}}`)
	require.Equal(t, http.StatusCreated, r.Status, "body: %s", r.Body)

	for _, c := range []struct{ body, message string }{
		{`{"service":"ffmpeg.h264_720p","params":{"duration_s":61}}`, `params.duration_s must be an integer 1..60, got 61`},
		{`{"service":"ffmpeg.h264_720p","params":{"duration_s":2.5}}`, `params.duration_s must be an integer 1..60, got 2.5`},
		{`{"service":"ffmpeg.h264_720p","params":{"duration_s":true}}`, `params.duration_s must be a JSON number or a string (integer), got true`},
		{`{"service":"ffmpeg.h264_720p","params":{"preset":"veryslow"}}`, `params.preset must be one of ultrafast, veryfast, fast, medium, got "veryslow"`},
		{`{"service":"ffmpeg.h264_720p","params":{"preset":1}}`, `params.preset must be a string, got 1`},
		{`{"service":"synthetic.mp4","params":{"undeclared":1}}`, `params.undeclared must be a string, got number`},
		{`{"service":"synthetic.mp4","params":{"undeclared":"1"}}`, `params.undeclared is not a param of synthetic.mp4; it takes delay_ms (an integer 0..600000), duration_ms (an integer 1..600000), mdat_bytes (an integer 1..1073741824), seed (text of at most 64 bytes)`},
		{`{"service":"synthetic.mp4","params":{"seed":"` + strings.Repeat("s", 65) + `"}}`, `params.seed must be text of at most 64 bytes, got "` + strings.Repeat("s", 32) + `..."`},
		{`{"service":"synthetic.mp4","params":{"mdat_bytes":1073741825}}`, `params.mdat_bytes must be an integer 1..1073741824, got 1073741825`},
	} {
		r := b.createJob(t, b.key, c.body)
		requireError(t, r, http.StatusUnprocessableEntity, "validation_error", "params")
		var e buyer.Error
		require.NoError(t, json.Unmarshal(r.Body, &e))
		require.Equal(t, c.message, e.Message, c.body)
	}
	// The contract's order holds: max_attempts is named before params.
	requireError(t, b.createJob(t, b.key, `{"service":"ffmpeg.h264_720p","max_attempts":0,"params":{"duration_s":true}}`),
		http.StatusUnprocessableEntity, "validation_error", "max_attempts")
	require.Equal(t, 2, b.count(t, `SELECT count(*) FROM jobs`))
}
