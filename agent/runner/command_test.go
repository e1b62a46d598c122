package runner

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCommandConfigIsValidated(t *testing.T) {
	t.Parallel()
	out := []string{"render", "{output}"}
	for name, tc := range map[string]struct {
		cfg  CommandConfig
		want string
	}{
		"no argv":          {CommandConfig{}, "argv must name a program"},
		"placeholder prog": {CommandConfig{Argv: []string{"{params}", "{output}"}}, "must be a program"},
		"no output":        {CommandConfig{Argv: []string{"render", "{params}"}}, "argv must contain {output}"},
		"timeout low":      {CommandConfig{Argv: out, TimeoutS: -1}, "timeout_s must be 1..86400"},
		"timeout high":     {CommandConfig{Argv: out, TimeoutS: 86401}, "timeout_s must be 1..86400"},
		"env not kv":       {CommandConfig{Argv: out, Env: []string{"NOEQUALS"}}, "not KEY=VALUE"},
		"env no key":       {CommandConfig{Argv: out, Env: []string{"=v"}}, "not KEY=VALUE"},
		"bad regexp":       {CommandConfig{Argv: out, ProgressRegexp: "("}, "progress_regexp"},
		"regexp no group":  {CommandConfig{Argv: out, ProgressRegexp: `^(\d+)%$`}, "needs a group"},
		"regexp done only": {CommandConfig{Argv: out, ProgressRegexp: `^(?P<done>\d+)$`}, "needs a group"},
	} {
		_, err := NewCommand(tc.cfg)
		require.ErrorContains(t, err, tc.want, name)
	}
	c, err := NewCommand(CommandConfig{Argv: []string{"render", "--out={output}"}})
	require.NoError(t, err)
	require.Equal(t, commandTimeoutDefS, c.Config().TimeoutS)
}

func TestLoadCommandConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "svc.json")
	require.NoError(t, os.WriteFile(path, []byte(`{"argv":["node","render.js","{params}","{output}"],"dir":"composition","timeout_s":30,"params":["title"]}`), 0o600))
	c, err := LoadCommandConfig(path)
	require.NoError(t, err)
	require.Equal(t, CommandConfig{Argv: []string{"node", "render.js", "{params}", "{output}"},
		Dir: filepath.Join(dir, "composition"), TimeoutS: 30, Params: []string{"title"}}, c)

	require.NoError(t, os.WriteFile(path, []byte(`{"argv":["x","{output}"],"timeout":30}`), 0o600))
	_, err = LoadCommandConfig(path)
	require.ErrorContains(t, err, `unknown field "timeout"`)
	_, err = LoadCommandConfig(filepath.Join(dir, "absent.json"))
	require.ErrorContains(t, err, "read command config")
}

func TestCommandCheckNamesWhatIsMissing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c, err := NewCommand(CommandConfig{Argv: []string{"rendermac-no-such-renderer", "{output}"}})
	require.NoError(t, err)
	require.ErrorContains(t, c.Check(), "find rendermac-no-such-renderer on PATH")
	c, err = NewCommand(CommandConfig{Argv: []string{"./render.sh", "{output}"}, Dir: dir})
	require.NoError(t, err)
	require.ErrorContains(t, c.Check(), "render.sh is not an executable file")
	c, err = NewCommand(CommandConfig{Argv: []string{"sh", "{output}"}, Dir: filepath.Join(dir, "gone")})
	require.NoError(t, err)
	require.ErrorContains(t, c.Check(), "is not a directory")
	c, err = NewCommand(CommandConfig{Argv: []string{"sh", "{output}"}, Dir: dir})
	require.NoError(t, err)
	require.NoError(t, c.Check())
}

func TestParseProgress(t *testing.T) {
	t.Parallel()
	def := regexp.MustCompile(DefaultProgressRegexp)
	pct := regexp.MustCompile(`^Rendered (?P<percent>\d+)%`)
	for line, want := range map[string]float64{
		"PROGRESS 15/60":   0.25,
		"PROGRESS 0.5":     0.5,
		"PROGRESS .75\r":   0.75,
		"PROGRESS 1":       1,
		"PROGRESS 2":       1, // clipped
		"PROGRESS 90/60":   1,
		"PROGRESS  3/4  ":  0.75,
		"PROGRESS 0/10":    0,
		"PROGRESS 5/0":     -1, // no total: not progress
		"progress 0.5":     -1,
		"PROGRESS half":    -1,
		"x PROGRESS 0.5":   -1,
		"PROGRESS 0.5 now": -1,
	} {
		got, ok := parseProgress(def, []byte(line))
		if want < 0 {
			require.False(t, ok, line)
			continue
		}
		require.True(t, ok, line)
		require.InDelta(t, want, got, 1e-9, line)
	}
	got, ok := parseProgress(pct, []byte("Rendered 40% (12/30)"))
	require.True(t, ok)
	require.InDelta(t, 0.4, got, 1e-9)
}

// runScript builds a command runner around a POSIX sh script.
func runScript(t *testing.T, script string, cfg CommandConfig) *Command {
	t.Helper()
	cfg.Argv = append([]string{"sh", "-c", script, "sh"}, cfg.Argv...)
	c, err := NewCommand(cfg)
	require.NoError(t, err)
	return c
}

// The program gets the params as a JSON file, the output and input paths,
// a scratch dir, and an environment that holds none of the agent's
// variables beyond the few it needs.
func TestCommandPassesParamsPathsAndAMinimalEnv(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	in := filepath.Join(dir, "input.mov")
	require.NoError(t, os.WriteFile(in, []byte("in"), 0o600))
	script := `cp "$1" "$2" && printf '%s\n%s\n' "$3" "$4" > "$2.paths" && env > "$2.env" && pwd > "$2.pwd"`
	c := runScript(t, script, CommandConfig{Argv: []string{"{params}", "{output}", "in={input}", "{dir}"},
		Dir: dir, Env: []string{"RENDER_QUALITY=draft"}, Params: []string{"title", "duration_s"}})
	out := filepath.Join(dir, "output.mp4")
	params := map[string]string{"title": `a "quoted" $(title); rm -rf /`, "duration_s": "3"}
	require.NoError(t, c.Run(t.Context(), Spec{Params: params}, in, out))

	var got map[string]string
	data, err := os.ReadFile(out)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &got))
	require.Equal(t, params, got, "the params file is the job's params as a JSON object")

	paths, err := os.ReadFile(out + ".paths")
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(paths)), "\n")
	require.Equal(t, "in="+in, lines[0])
	require.Equal(t, dir, filepath.Dir(lines[1]), "the scratch dir sits beside the output")
	_, err = os.Stat(lines[1])
	require.ErrorIs(t, err, os.ErrNotExist, "the scratch dir (and the params file) is removed after the run")

	pwd, err := os.ReadFile(out + ".pwd")
	require.NoError(t, err)
	require.Equal(t, dir, strings.TrimSpace(string(pwd)))

	env, err := os.ReadFile(out + ".env")
	require.NoError(t, err)
	allowed := map[string]bool{"PATH": true, "HOME": true, "USER": true, "LANG": true, "LC_ALL": true,
		"TMPDIR": true, "RENDER_QUALITY": true, "PWD": true, "SHLVL": true, "_": true, "OLDPWD": true}
	for line := range strings.Lines(string(env)) {
		k, _, _ := strings.Cut(line, "=")
		require.True(t, allowed[k], "variable %s leaked from the agent's environment", k)
	}
	require.Contains(t, string(env), "RENDER_QUALITY=draft\n")
	require.Contains(t, string(env), "TMPDIR="+lines[1]+"\n")

	err = c.Run(t.Context(), Spec{Params: map[string]string{"codec": "x"}}, "", out)
	var pe *ParamError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, "codec", pe.Param)
}

func TestCommandNoParamsIsAnEmptyObject(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "o.mp4")
	c := runScript(t, `cp "$1" "$2"`, CommandConfig{Argv: []string{"{params}", "{output}"}})
	require.NoError(t, c.Run(t.Context(), Spec{}, "", out))
	data, err := os.ReadFile(out)
	require.NoError(t, err)
	require.Equal(t, "{}", string(data))
}

// A non-zero exit is a CommandError with the status and the tail of the
// output, progress lines left out.
func TestCommandNonZeroExit(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "o.mp4")
	var mu sync.Mutex
	var seen []float64
	c := runScript(t, `echo "PROGRESS 1/4"; echo "loading scene"; echo "PROGRESS 2/4" >&2; echo "PROGRESS 1/4"; echo "scene.tsx:3: undefined is not a function" >&2; exit 3`,
		CommandConfig{Argv: []string{"{output}"}})
	err := c.Run(t.Context(), Spec{Progress: func(f float64) { mu.Lock(); seen = append(seen, f); mu.Unlock() }}, "", out)
	var ce *CommandError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "exit", ce.Reason)
	require.Equal(t, 3, ce.ExitCode)
	require.False(t, ce.Timeout())
	require.Contains(t, ce.Output, "scene.tsx:3: undefined is not a function")
	require.Contains(t, ce.Output, "loading scene")
	require.NotContains(t, ce.Output, "PROGRESS")
	require.Contains(t, err.Error(), "command sh: exited with status 3: ")
	mu.Lock()
	defer mu.Unlock()
	// stdout and stderr are read concurrently, so 2/4 may come first; the
	// fraction never goes back either way.
	require.NotEmpty(t, seen)
	require.InDelta(t, 0.5, seen[len(seen)-1], 1e-9)
	for i := 1; i < len(seen); i++ {
		require.Greater(t, seen[i], seen[i-1])
	}
}

func TestCommandExitZeroWithoutOutputFails(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := runScript(t, `echo "all good" >&2`, CommandConfig{Argv: []string{"{output}"}})
	err := c.Run(t.Context(), Spec{}, "", filepath.Join(dir, "o.mp4"))
	var ce *CommandError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "no_output", ce.Reason)

	c = runScript(t, `: > "$1"`, CommandConfig{Argv: []string{"{output}"}})
	err = c.Run(t.Context(), Spec{}, "", filepath.Join(dir, "empty.mp4"))
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "no_output", ce.Reason, "an empty file is no output")
}

// A program that writes megabytes without a newline cannot make the agent
// buffer them: the message keeps a bounded tail and the run ends.
func TestCommandOutputIsBounded(t *testing.T) {
	t.Parallel()
	c := runScript(t, `{ head -c 3000000 /dev/zero | tr '\0' x; echo; echo "No space left on device"; } >&2; exit 1`,
		CommandConfig{Argv: []string{"{output}"}})
	err := c.Run(t.Context(), Spec{}, "", filepath.Join(t.TempDir(), "o.mp4"))
	var ce *CommandError
	require.ErrorAs(t, err, &ce)
	require.LessOrEqual(t, len(ce.Output), stderrTailBytes)
	// The agent recognises a full disk by this text (package agent, disk.go).
	require.Contains(t, err.Error(), "No space left on device")
}

// A run whose attempt was stopped before it began starts nothing.
func TestCommandStoppedBeforeStartRunsNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := runScript(t, `echo ran > "$1"`, CommandConfig{Argv: []string{"{output}"}})
	ctx, cancel := context.WithCancelCause(t.Context())
	cause := errors.New("lease lost")
	cancel(cause)
	out := filepath.Join(dir, "o.mp4")
	require.ErrorIs(t, c.Run(ctx, Spec{}, "", out), cause)
	_, err := os.Stat(out)
	require.ErrorIs(t, err, os.ErrNotExist, "the program did not run")
}

func TestCommandRejectsRelativePaths(t *testing.T) {
	t.Parallel()
	c := runScript(t, `exit 0`, CommandConfig{Argv: []string{"{output}"}})
	require.ErrorContains(t, c.Run(t.Context(), Spec{}, "", "o.mp4"), "must be absolute")
	require.ErrorContains(t, c.Run(t.Context(), Spec{}, "in.mov", "/tmp/o.mp4"), "must be absolute")
}
