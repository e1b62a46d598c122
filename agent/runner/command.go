package runner

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rendermac/rendermac/internal/clock"
	"github.com/rendermac/rendermac/protocol"
)

// Limits of a command runner's configuration and of what it reads back.
const (
	commandTimeoutDefS = 600
	commandTimeoutMaxS = 86400
	// commandLineMax bounds one line of the command's output as read for
	// progress; the rest of a longer line is dropped, never buffered.
	commandLineMax = 4096
	// commandParamsFile is the name of the params file in the scratch dir.
	commandParamsFile = "params.json"
)

// Placeholders a command's argv may contain. Each is replaced, anywhere in an
// argument, by a path the agent owns; nothing from the job reaches argv.
const (
	PlaceholderParams = "{params}" // a file holding the job's params as a JSON object
	PlaceholderOutput = "{output}" // where the command must write the MP4
	PlaceholderInput  = "{input}"  // the job's input file, "" when it has none
	PlaceholderDir    = "{dir}"    // a scratch directory, removed with the attempt
)

// DefaultProgressRegexp is the progress line protocol a command speaks unless
// its config sets progress_regexp: a line, on stdout or stderr, that is
// "PROGRESS <done>/<total>" (frames) or "PROGRESS <fraction>" (0..1).
const DefaultProgressRegexp = `^PROGRESS\s+(?:(?P<done>\d+)/(?P<total>\d+)|(?P<fraction>\d*\.?\d+))\s*$`

// CommandConfig configures a command runner: a program the operator installs
// (a composition renderer such as the example in deploy/composition, or the
// Remotion CLI) that the agent runs once per job. Its JSON form is what a
// --command-service file holds and what a service catalogue entry with
// runner "command" carries:
//
//	{"argv": ["node", "render.js", "{params}", "{output}"],
//	 "dir": "/opt/composition", "timeout_s": 300,
//	 "params": ["title", "duration_s"], "env": ["CHROMIUM_PATH=/usr/bin/chromium"]}
type CommandConfig struct {
	// Argv is the program and its arguments, run without a shell. Each
	// element may contain the placeholders {params}, {output}, {input} and
	// {dir}. Argv[0] is looked up on PATH unless it contains a slash; a
	// relative path with a slash is relative to Dir.
	Argv []string `json:"argv"`
	// Dir is the command's working directory ("" keeps the agent's). When
	// the config is read from a file, a relative Dir is relative to the
	// file's directory.
	Dir string `json:"dir,omitempty"`
	// Env lists KEY=VALUE variables added to the command's environment,
	// which otherwise holds only PATH, HOME, USER, LANG, LC_ALL and TMPDIR
	// (the scratch dir), so the agent's own secrets never reach it.
	Env []string `json:"env,omitempty"`
	// TimeoutS is the time limit of one job in seconds (1..86400, default
	// 600). When it is reached the command's process group is killed and
	// the attempt fails with runner_failed.
	TimeoutS int `json:"timeout_s,omitempty"`
	// Params, when not empty, is the allow-list of job parameter names; a
	// job with another one fails with a ParamError before anything runs.
	Params []string `json:"params,omitempty"`
	// ProgressRegexp matches a progress line of the command's output. It
	// has a named group fraction (0..1), percent (0..100), or done and total
	// (done of total frames). Empty means DefaultProgressRegexp.
	ProgressRegexp string `json:"progress_regexp,omitempty"`
}

// LoadCommandConfig reads a CommandConfig from a JSON file. An unknown key is
// an error, so a typo is not silently ignored; a relative Dir is resolved
// against the file's directory.
func LoadCommandConfig(path string) (CommandConfig, error) {
	var c CommandConfig
	data, err := os.ReadFile(path)
	if err != nil {
		return c, fmt.Errorf("read command config: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return c, fmt.Errorf("command config %s: %w", path, err)
	}
	if c.Dir != "" && !filepath.IsAbs(c.Dir) {
		c.Dir = filepath.Join(filepath.Dir(path), c.Dir)
	}
	return c, nil
}

// Command is the command runner kind: it runs an operator's program with the
// job's params as a JSON file and an output path, under a time limit, in a
// process group of its own that is killed as a whole when the job is
// cancelled, the lease is lost, the agent shuts down or the time limit is
// reached, and when the program exits (so nothing it started outlives it).
// Its progress lines are passed to Spec.Progress.
//
// Exit status 0 with a non-empty output file is success. Anything else is a
// *CommandError, which the agent reports as runner_failed (not retryable:
// the same program would fail the same job elsewhere), unless the disk was
// full, which the agent reports as the retryable no_capacity.
type Command struct {
	cfg      CommandConfig
	timeout  time.Duration
	progress *regexp.Regexp
	// Clock drives the time limit; nil means the real clock.
	Clock clock.Clock
	// KillGrace is how long the group has between SIGTERM and SIGKILL;
	// zero means killGrace.
	KillGrace time.Duration
}

// NewCommand validates cfg and returns its runner.
func NewCommand(cfg CommandConfig) (*Command, error) {
	if len(cfg.Argv) == 0 || cfg.Argv[0] == "" {
		return nil, errors.New("command runner: argv must name a program")
	}
	if strings.Contains(cfg.Argv[0], "{") {
		return nil, fmt.Errorf("command runner: argv[0] %q must be a program, not a placeholder", cfg.Argv[0])
	}
	if !slices.ContainsFunc(cfg.Argv[1:], func(a string) bool { return strings.Contains(a, PlaceholderOutput) }) {
		return nil, fmt.Errorf("command runner: argv must contain %s, the path the program writes", PlaceholderOutput)
	}
	switch {
	case cfg.TimeoutS == 0:
		cfg.TimeoutS = commandTimeoutDefS
	case cfg.TimeoutS < 1 || cfg.TimeoutS > commandTimeoutMaxS:
		return nil, fmt.Errorf("command runner: timeout_s must be 1..%d, got %d", commandTimeoutMaxS, cfg.TimeoutS)
	}
	for _, kv := range cfg.Env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return nil, fmt.Errorf("command runner: env entry %q is not KEY=VALUE", clip(kv))
		}
	}
	pattern := cfg.ProgressRegexp
	if pattern == "" {
		pattern = DefaultProgressRegexp
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, fmt.Errorf("command runner: progress_regexp: %w", err)
	}
	names := re.SubexpNames()
	has := func(n string) bool { return slices.Contains(names, n) }
	if !has("fraction") && !has("percent") && !(has("done") && has("total")) {
		return nil, errors.New("command runner: progress_regexp needs a group (?P<fraction>...), (?P<percent>...) or (?P<done>...) and (?P<total>...)")
	}
	return &Command{cfg: cfg, timeout: time.Duration(cfg.TimeoutS) * time.Second, progress: re}, nil
}

// Config returns the validated configuration (timeout_s filled in).
func (c *Command) Config() CommandConfig { return c.cfg }

// Check resolves the program and the working directory without running
// anything. The agent calls it at start-up, so a missing renderer is
// reported once, clearly, instead of failing every job.
func (c *Command) Check() error {
	if c.cfg.Dir != "" {
		if st, err := os.Stat(c.cfg.Dir); err != nil || !st.IsDir() {
			return fmt.Errorf("command runner: dir %s is not a directory (err: %v)", c.cfg.Dir, err)
		}
	}
	if _, err := c.program(); err != nil {
		return err
	}
	return nil
}

// program resolves argv[0] as exec.Cmd would from Dir.
func (c *Command) program() (string, error) {
	p := c.cfg.Argv[0]
	if strings.Contains(p, "/") {
		if !filepath.IsAbs(p) && c.cfg.Dir != "" {
			p = filepath.Join(c.cfg.Dir, p)
		}
		if st, err := os.Stat(p); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			return "", fmt.Errorf("command runner: %s is not an executable file (err: %v)", p, err)
		}
		return p, nil
	}
	found, err := exec.LookPath(p)
	if err != nil {
		return "", fmt.Errorf("command runner: find %s on PATH (install it or give its path in argv[0]): %w", p, err)
	}
	return found, nil
}

// Args expands the placeholders of argv[1:] for one job.
func (c *Command) Args(paramsPath, inputPath, outputPath, dir string) []string {
	r := strings.NewReplacer(PlaceholderParams, paramsPath, PlaceholderOutput, outputPath,
		PlaceholderInput, inputPath, PlaceholderDir, dir)
	out := make([]string, 0, len(c.cfg.Argv)-1)
	for _, a := range c.cfg.Argv[1:] {
		out = append(out, r.Replace(a))
	}
	return out
}

// env is the command's environment: a few variables a program needs from
// the agent's, the scratch dir as TMPDIR, then the configured ones.
func (c *Command) env(scratch string) []string {
	var env []string
	for _, k := range []string{"PATH", "HOME", "USER", "LANG", "LC_ALL"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	env = append(env, "TMPDIR="+scratch)
	return append(env, c.cfg.Env...)
}

// CommandError is a command that did not produce its output.
type CommandError struct {
	// Program is argv[0] as configured.
	Program string
	// Reason is "timeout", "exit" (non-zero status), "signal" (killed by a
	// signal the agent did not send) or "no_output" (status 0, no file).
	Reason string
	// ExitCode is the exit status for "exit", else -1.
	ExitCode int
	// Detail says more: the time limit, the signal, the output path.
	Detail string
	// Output is the tail of the command's output, progress lines left out.
	Output string
}

func (e *CommandError) Error() string {
	msg := fmt.Sprintf("command %s: %s", e.Program, e.Detail)
	if e.Output != "" {
		msg += ": " + e.Output
	}
	return msg
}

// Timeout reports whether the command was killed for reaching its time limit.
func (e *CommandError) Timeout() bool { return e.Reason == "timeout" }

// Run checks the params, writes them to a JSON file in a scratch dir beside
// outputPath, and runs the command until it exits, ctx ends, or the time
// limit is reached.
func (c *Command) Run(ctx context.Context, spec Spec, inputPath, outputPath string) error {
	if len(c.cfg.Params) > 0 {
		if err := checkKnown(spec.Params, c.cfg.Params...); err != nil {
			return err
		}
	}
	if !filepath.IsAbs(outputPath) || (inputPath != "" && !filepath.IsAbs(inputPath)) {
		return errors.New("command runner: input and output paths must be absolute")
	}
	if ctx.Err() != nil {
		// Stopped before it started (a cancel while the input downloaded):
		// do not start a renderer only to kill it.
		return fmt.Errorf("command %s not started: %w", c.cfg.Argv[0], context.Cause(ctx))
	}
	bin, err := c.program()
	if err != nil {
		return err
	}
	scratch, err := os.MkdirTemp(filepath.Dir(outputPath), "command-")
	if err != nil {
		return fmt.Errorf("command runner: create scratch dir: %w", err)
	}
	defer os.RemoveAll(scratch)
	data, err := json.Marshal(spec.Params)
	if err != nil {
		return fmt.Errorf("command runner: encode params: %w", err)
	}
	if string(data) == "null" {
		data = []byte("{}") // a job without params still gets an object
	}
	paramsPath := filepath.Join(scratch, commandParamsFile)
	if err := os.WriteFile(paramsPath, data, 0o600); err != nil {
		return fmt.Errorf("command runner: write params: %w", err)
	}
	cmd := exec.Command(bin, c.Args(paramsPath, inputPath, outputPath, scratch)...)
	cmd.Dir = c.cfg.Dir
	cmd.Env = c.env(scratch)
	out := &commandOutput{re: c.progress, report: spec.Progress}
	res, err := c.execute(ctx, cmd, out)
	if err != nil {
		return err
	}
	return c.judge(ctx, res, out, outputPath)
}

// commandResult is how the process ended.
type commandResult struct {
	state    *os.ProcessState
	timedOut bool
	stopped  bool
}

// judge maps how the command ended to Run's error.
func (c *Command) judge(ctx context.Context, res commandResult, out *commandOutput, outputPath string) error {
	e := &CommandError{Program: c.cfg.Argv[0], ExitCode: -1, Output: out.tail()}
	switch {
	case res.stopped:
		return fmt.Errorf("command %s stopped, process group killed: %w", c.cfg.Argv[0], context.Cause(ctx))
	case res.timedOut:
		e.Reason, e.Detail = "timeout", fmt.Sprintf("time limit of %ds reached, process group killed", c.cfg.TimeoutS)
	case res.state.Success():
		st, err := os.Stat(outputPath)
		if err == nil && st.Mode().IsRegular() && st.Size() > 0 {
			return nil
		}
		e.Reason, e.Detail = "no_output", "exited 0 but wrote no output file"
	case res.state.ExitCode() >= 0:
		e.Reason, e.ExitCode, e.Detail = "exit", res.state.ExitCode(), fmt.Sprintf("exited with status %d", res.state.ExitCode())
	default:
		e.Reason, e.Detail = "signal", res.state.String()
	}
	return e
}

// execute starts cmd in its own process group, feeds its output to out, and
// waits for it, killing the group when ctx ends or the time limit passes.
// After the program exits the group is killed anyway, so a child it left
// behind does not outlive the job.
func (c *Command) execute(ctx context.Context, cmd *exec.Cmd, out *commandOutput) (commandResult, error) {
	var res commandResult
	stdoutR, stdoutW, err := os.Pipe()
	if err != nil {
		return res, fmt.Errorf("command runner: pipe: %w", err)
	}
	stderrR, stderrW, err := os.Pipe()
	if err != nil {
		stdoutR.Close()
		stdoutW.Close()
		return res, fmt.Errorf("command runner: pipe: %w", err)
	}
	// *os.File outputs: the process writes to the pipes directly, and Wait
	// returns when the program exits, not when the last holder of the pipe
	// (a grandchild) closes it.
	cmd.Stdout, cmd.Stderr = stdoutW, stderrW
	setProcessGroup(cmd)
	err = cmd.Start()
	stdoutW.Close()
	stderrW.Close()
	if err != nil {
		stdoutR.Close()
		stderrR.Close()
		return res, fmt.Errorf("command runner: start %s: %w", c.cfg.Argv[0], err)
	}
	var readers sync.WaitGroup
	for _, r := range []*os.File{stdoutR, stderrR} {
		readers.Go(func() { scanLines(r, out.line) })
	}
	waited := make(chan *os.ProcessState, 1)
	go func() {
		// Wait's error only repeats the state (non-zero status, signal).
		_ = cmd.Wait()
		waited <- cmd.ProcessState
	}()
	clk := c.Clock
	if clk == nil {
		clk = clock.Real{}
	}
	select {
	case res.state = <-waited:
	case <-ctx.Done():
		res.stopped = true
		res.state = c.terminate(cmd, waited, clk)
	case <-clk.After(c.timeout):
		res.timedOut = true
		res.state = c.terminate(cmd, waited, clk)
	}
	killGroup(cmd, true)
	// The group is dead; a process that left it (a new session) may still
	// hold a pipe, so the readers get a bounded time before the pipes close.
	done := make(chan struct{})
	go func() { readers.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(killGrace):
	}
	stdoutR.Close()
	stderrR.Close()
	<-done
	return res, nil
}

// terminate asks the group to stop (SIGTERM), then kills it (SIGKILL) if the
// program has not exited within the grace period.
func (c *Command) terminate(cmd *exec.Cmd, waited <-chan *os.ProcessState, clk clock.Clock) *os.ProcessState {
	killGroup(cmd, false)
	grace := c.KillGrace
	if grace <= 0 {
		grace = killGrace
	}
	select {
	case st := <-waited:
		return st
	case <-clk.After(grace):
		killGroup(cmd, true)
		return <-waited
	}
}

// commandOutput parses progress lines and keeps the tail of the rest.
type commandOutput struct {
	re     *regexp.Regexp
	report func(float64)

	mu   sync.Mutex
	last float64
	buf  tailBuffer
}

func (o *commandOutput) line(b []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if f, ok := parseProgress(o.re, b); ok {
		// Progress only moves forward: several processes (or a retrying
		// renderer) may report, and a job's fraction never goes back.
		if f > o.last {
			o.last = f
			if o.report != nil {
				o.report(f)
			}
		}
		return
	}
	o.buf.Write(b)
	o.buf.Write([]byte{'\n'})
}

// tail is the last output lines, trimmed.
func (o *commandOutput) tail() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return string(bytes.TrimSpace(o.buf.buf))
}

// parseProgress reads a progress line as a fraction in 0..1.
func parseProgress(re *regexp.Regexp, line []byte) (float64, bool) {
	m := re.FindSubmatch(bytes.TrimRight(line, "\r"))
	if m == nil {
		return 0, false
	}
	group := func(name string) (float64, bool) {
		i := re.SubexpIndex(name)
		if i < 0 || m[i] == nil {
			return 0, false
		}
		v, err := strconv.ParseFloat(string(m[i]), 64)
		return v, err == nil
	}
	var f float64
	if v, ok := group("fraction"); ok {
		f = v
	} else if v, ok := group("percent"); ok {
		f = v / 100
	} else if d, ok := group("done"); ok {
		t, ok := group("total")
		if !ok || t <= 0 {
			return 0, false
		}
		f = d / t
	} else {
		return 0, false
	}
	return min(max(f, 0), 1), true
}

// scanLines calls line for each line of r (without its newline). A line
// longer than commandLineMax is cut there; the rest of it is discarded, so a
// program writing without newlines cannot make the agent buffer it.
func scanLines(r io.Reader, line func([]byte)) {
	br := bufio.NewReaderSize(r, commandLineMax)
	long := false
	for {
		b, err := br.ReadSlice('\n')
		if len(b) > 0 && !long {
			line(bytes.TrimRight(b, "\n"))
		}
		long = errors.Is(err, bufio.ErrBufferFull)
		if err != nil && !long {
			return
		}
	}
}

// A catalogue service of runner kind "command" gets a command runner from
// its entry's argv and time limit; `rendermac agent --command-service
// NAME=FILE` replaces it with a fuller config (env, dir, progress regexp).
func init() {
	Kinds[protocol.RunnerCommand] = Kind{New: func(svc protocol.Service, _ Env) (Runner, error) {
		return NewCommand(CommandConfig{Argv: svc.Runner.Command, TimeoutS: svc.Runner.TimeoutS})
	}}
}
