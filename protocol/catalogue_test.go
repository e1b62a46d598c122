package protocol

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

const transcodeEntry = `{"name": "transcode.hevc_720p", "price_cents": 60,
  "runner": {"kind": "transcode", "codec": "hevc", "width": 1280, "height": 720, "bitrate_kbps": 2500},
  "params": {"duration_s": {"type": "integer", "min": 1, "max": 600, "default": 30},
             "fast": {"type": "boolean", "default": false},
             "gain": {"type": "number", "min": -1.5, "max": 1.5}},
  "verify": {"container": "mov,mp4,m4a,3gp,3g2,mj2", "codec": "hevc", "width": 1280, "height": 720,
             "duration_param": "duration_s", "duration_tolerance_s": 0.5, "min_video_tracks": 1}}`

func TestParseCatalogue(t *testing.T) {
	t.Parallel()
	got, err := ParseCatalogue([]byte(`{"include_builtin": true, "services": [` + transcodeEntry + `]}`))
	require.NoError(t, err)
	require.Len(t, got, len(Services)+1)
	s, ok := FindService(got, "transcode.hevc_720p")
	require.True(t, ok)
	require.Equal(t, RunnerSpec{Kind: RunnerTranscode, Codec: "hevc", Width: 1280, Height: 720, BitrateKbps: 2500}, s.Runner)
	require.Equal(t, []ParamSpec{
		{Name: "duration_s", Type: ParamInteger, Min: 1, Max: 600, Default: "30"},
		{Name: "fast", Type: ParamBoolean, Default: "false"},
		{Name: "gain", Type: ParamNumber, Min: -1.5, Max: 1.5},
	}, s.Params)
	require.True(t, s.Verify.Probes())
	require.Equal(t, "mp4", s.Media)

	only, err := ParseCatalogue([]byte(`{"services": [` + transcodeEntry + `]}`))
	require.NoError(t, err)
	require.Len(t, only, 1, "without include_builtin the file is the whole catalogue")
}

// A bad file is refused naming the service and the field.
func TestParseCatalogueErrorsNameServiceAndField(t *testing.T) {
	t.Parallel()
	entry := func(mut func(m map[string]any)) string {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(transcodeEntry), &m))
		mut(m)
		b, err := json.Marshal(map[string]any{"services": []any{m}})
		require.NoError(t, err)
		return string(b)
	}
	runner := func(k string, v any) func(map[string]any) {
		return func(m map[string]any) { m["runner"].(map[string]any)[k] = v }
	}
	param := func(p, k string, v any) func(map[string]any) {
		return func(m map[string]any) { m["params"].(map[string]any)[p].(map[string]any)[k] = v }
	}
	for _, c := range []struct {
		file, want string
	}{
		{entry(runner("codec", "vp9")), `service catalogue: service "transcode.hevc_720p" (services[0]): runner.codec: want h264 or hevc, got "vp9"`},
		{entry(runner("kind", "remotion")), `service "transcode.hevc_720p" (services[0]): runner.kind: want one of synthetic, ffmpeg, transcode, command, got "remotion"`},
		{entry(runner("width", 1281)), `runner.width: want an even number 16..7680, got 1281`},
		{entry(runner("command", []string{"x"})), `runner.command: not a setting of runner kind "transcode"`},
		{entry(func(m map[string]any) { delete(m, "price_cents") }), `service "transcode.hevc_720p" (services[0]): price_cents: missing`},
		{entry(func(m map[string]any) { m["name"] = "Bad Name" }), `service "Bad Name" (services[0]): name: want 1..64 bytes of [a-z0-9._-], got "Bad Name"`},
		{entry(func(m map[string]any) { m["colour"] = 1 }), `service "transcode.hevc_720p" (services[0]): entry: json: unknown field "colour"`},
		{entry(param("duration_s", "max", 0)), `params.duration_s.max: max 0 is below min 1`},
		{entry(param("duration_s", "default", 601)), `params.duration_s.default: 601 is not a valid integer for this param`},
		{entry(param("duration_s", "type", "float")), `params.duration_s.type: want integer, number, boolean or string, got "float"`},
		{entry(param("fast", "default", "yes")), `params.fast.default: "yes" is not a valid boolean for this param`},
		{entry(func(m map[string]any) { m["verify"].(map[string]any)["codec"] = "h264" }), `verify.codec: want the runner's codec hevc, got h264`},
		{entry(func(m map[string]any) { m["verify"].(map[string]any)["duration_param"] = "fast" }), `verify.duration_param: "fast" is not a declared integer or number param`},
		{`{"services": [{"name": "command.remotion", "price_cents": 1, "runner": {"kind": "command", "command": ["npx"]}}]}`,
			`service "command.remotion" (services[0]): runner.timeout_s: want 1..86400, got 0`},
		// A command runner has no frame size: width is another kind's setting.
		{`{"services": [{"name": "c", "price_cents": 1, "runner": {"kind": "command", "command": ["npx"], "timeout_s": 9, "width": 640}}]}`,
			`service "c" (services[0]): runner.width: not a setting of runner kind "command"`},
		{entry(func(m map[string]any) { m["params"].(map[string]any)["Bad-Name"] = map[string]any{"type": "boolean"} }),
			`params.Bad-Name: a param name must match [a-z0-9_]{1,32}`},
		{`{"include_builtin": true, "services": [{"name": "synthetic.mp4", "price_cents": 1, "runner": {"kind": "synthetic"}}]}`,
			`service "synthetic.mp4" (services[0]): name: named twice`},
		{`{"services": []}`, `service catalogue: services: no services`},
		{`{"services": [], "extra": 1}`, `service catalogue: file: json: unknown field "extra"`},
		{`{"services": [{}]} {}`, `service catalogue: file: trailing data`},
	} {
		_, err := ParseCatalogue([]byte(c.file))
		require.ErrorContains(t, err, c.want, c.file)
		var ce *CatalogueError
		require.ErrorAs(t, err, &ce)
	}
}

func TestParamSpecAccepts(t *testing.T) {
	t.Parallel()
	i := ParamSpec{Type: ParamInteger, Min: -5, Max: 60}
	for v, ok := range map[string]bool{"0": true, "-5": true, "60": true, "61": false, "-6": false, "1e1": false,
		"01": false, "+1": false, " 1": false, "1 ": false, "2.0": false, "": false, "0x10": false} {
		require.Equal(t, ok, i.Accepts(v), "integer %q", v)
	}
	n := ParamSpec{Type: ParamNumber, Min: 0, Max: 1e3}
	for v, ok := range map[string]bool{"0.5": true, "1e3": true, "1e999": false, "NaN": false, "Inf": false,
		"1_0": false, ".5": false, "1001": false} {
		require.Equal(t, ok, n.Accepts(v), "number %q", v)
	}
	b := ParamSpec{Type: ParamBoolean}
	require.True(t, b.Accepts("true"))
	require.False(t, b.Accepts("True"))
	s := ParamSpec{Type: ParamString, Enum: []string{"fast", "medium"}}
	require.True(t, s.Accepts("fast"))
	require.False(t, s.Accepts("slow"))
}
