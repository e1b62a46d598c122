package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/rendermac/rendermac/agent"
	"github.com/rendermac/rendermac/client"
	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/protocol/buyer"
)

// defaultServer is where `rendermac dev` listens unless told otherwise.
const defaultServer = "http://127.0.0.1:8080"

// jobsCommand is one subcommand of `rendermac jobs`.
type jobsCommand struct {
	name, synopsis, summary string
	// flags adds the subcommand's own flags; run gets the parsed
	// arguments and the buyer's client.
	flags func(*flag.FlagSet) func(ctx context.Context, j *jobsRun, args []string) error
}

func jobsCommands() []jobsCommand {
	return []jobsCommand{
		{"submit", "--service S [--param K=V]... [--input FILE] [--wait] [--download OUT]", "create a job, uploading its input; optionally wait for it and download its output", submitFlags},
		{"get", "JOB", "show a job: its status, attempts and output", oneJob(func(ctx context.Context, j *jobsRun, id string) error {
			d, err := j.c.Get(ctx, id)
			if err != nil {
				return err
			}
			return j.show(d, func(w io.Writer) { describeJob(w, d) })
		})},
		{"list", "[--status S] [--limit N]", "list your jobs, newest first", listFlags},
		{"cancel", "JOB", "cancel a job (a running attempt is told to stop)", oneJob(func(ctx context.Context, j *jobsRun, id string) error {
			c, err := j.c.Cancel(ctx, id)
			if err != nil {
				return err
			}
			return j.show(c.Job, func(w io.Writer) { fmt.Fprintf(w, "job %s: %s\n", id, c.Job.Status) })
		})},
		{"events", "JOB", "show a job's journal, oldest first", oneJob(func(ctx context.Context, j *jobsRun, id string) error {
			events, err := j.c.AllEvents(ctx, id)
			if err != nil {
				return err
			}
			return j.show(events, func(w io.Writer) {
				tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, "SEQ\tAT\tKIND\tFROM\tTO\tCODE\tACTOR")
				for _, e := range events {
					fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", e.Seq, e.At.Format(time.RFC3339), e.Kind, e.FromStatus, e.ToStatus, e.Code, e.Actor)
				}
				_ = tw.Flush()
			})
		})},
		{"wait", "JOB", "wait until a job ends; exit 0 only if it succeeded", oneJob(func(ctx context.Context, j *jobsRun, id string) error {
			return j.finish(ctx, id, "")
		})},
		{"download", "JOB OUT", "download a succeeded job's output to OUT, its SHA-256 checked", func(*flag.FlagSet) func(context.Context, *jobsRun, []string) error {
			return func(ctx context.Context, j *jobsRun, args []string) error {
				if len(args) != 2 {
					return usageError{"download: want JOB OUT (the job's id and the file to write)"}
				}
				d, err := j.c.Get(ctx, args[0])
				if err != nil {
					return err
				}
				if err := j.download(ctx, d, args[1]); err != nil {
					return err
				}
				return j.show(d, func(io.Writer) {})
			}
		}},
	}
}

// oneJob is a subcommand taking exactly one job id.
func oneJob(run func(ctx context.Context, j *jobsRun, id string) error) func(*flag.FlagSet) func(context.Context, *jobsRun, []string) error {
	return func(*flag.FlagSet) func(context.Context, *jobsRun, []string) error {
		return func(ctx context.Context, j *jobsRun, args []string) error {
			if len(args) != 1 || args[0] == "" {
				return usageError{"want exactly one job id"}
			}
			return run(ctx, j, args[0])
		}
	}
}

func runJobs(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || isHelp(args[0]) || args[0] == "help" {
		fmt.Fprintln(stdout, "Usage: rendermac jobs <subcommand> [flags]\n\nA buyer's jobs, through the HTTP API (docs/client.md).\n\nSubcommands:")
		for _, c := range jobsCommands() {
			fmt.Fprintf(stdout, "  %-9s %s\n", c.name, c.summary)
		}
		fmt.Fprintln(stdout, "\nEvery subcommand takes --server URL (env RENDERMAC_SERVER, default "+defaultServer+", where `rendermac dev` listens),\n"+
			"--api-key KEY (env RENDERMAC_API_KEY), --ca-file, --server-pin, --insecure-plaintext (as the agent's) and -o text|json.\n"+
			"Exit status: 0 done (for submit --wait and wait: the job succeeded, and a download matched its SHA-256), 1 refused or failed, 2 bad usage.")
		return nil
	}
	for _, c := range jobsCommands() {
		if c.name == args[0] {
			return runJobsCommand(ctx, c, args[1:], stdout, stderr)
		}
	}
	return usageError{fmt.Sprintf("unknown jobs subcommand %q (want submit, get, list, cancel, events, wait or download)", args[0])}
}

// jobsRun is one invocation's client and output.
type jobsRun struct {
	c              *client.Client
	json           bool
	stdout, stderr io.Writer
	// tty: progress bars on stderr; otherwise plain lines.
	tty bool
}

func runJobsCommand(ctx context.Context, c jobsCommand, args []string, stdout, stderr io.Writer) error {
	set := newFlagSet("jobs "+c.name, "[flags] "+c.synopsis, stderr)
	server := set.String("server", envOr("RENDERMAC_SERVER", defaultServer), "the control plane's URL (env RENDERMAC_SERVER)")
	apiKey := set.String("api-key", "", "the buyer's API key (default: env RENDERMAC_API_KEY; prefer the environment, a flag shows in ps)")
	var tr agent.Transport
	set.StringVar(&tr.CAFile, "ca-file", "", "PEM bundle of the CA that signed the server's certificate (a private CA), trusted besides the system roots")
	set.StringVar(&tr.ServerPin, "server-pin", "", "sha256/BASE64 of the server certificate's public key: refuse any other")
	set.BoolVar(&tr.InsecurePlaintext, "insecure-plaintext", false, "allow http:// to a host that is not loopback (the API key crosses the network in clear)")
	output := set.String("o", "text", "output: text, or json (one JSON document on stdout, for scripts)")
	machineDefault(set, "server", defaultServer)
	run := c.flags(set)
	if err := parseInterspersed(set, args); err != nil {
		return err
	}
	if *output != "text" && *output != "json" {
		return usageError{fmt.Sprintf("-o %q: want text or json", *output)}
	}
	key := *apiKey
	if key == "" {
		key = os.Getenv("RENDERMAC_API_KEY")
	}
	if key == "" {
		return usageError{"no API key: set RENDERMAC_API_KEY or pass --api-key (rendermac admin create-api-key makes one; rendermac dev prints one)"}
	}
	u, err := url.Parse(*server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return usageError{fmt.Sprintf("--server %q: want http://HOST:PORT or https://HOST[:PORT]", *server)}
	}
	if err := tr.CheckURL("--server", u); err != nil {
		return usageError{strings.Replace(err.Error(), "the device token", "the API key", 1)}
	}
	httpc, err := tr.Client()
	if err != nil {
		return usageError{err.Error()}
	}
	cl, err := client.New(*server, key, client.WithHTTPClient(httpc))
	if err != nil {
		return usageError{err.Error()}
	}
	j := &jobsRun{c: cl, json: *output == "json", stdout: stdout, stderr: stderr, tty: isTerminal(stderr)}
	return run(ctx, j, set.Args())
}

// parseInterspersed parses flags before and after the positional
// arguments (`get JOB -o json` as well as `get -o json JOB`).
func parseInterspersed(set *flag.FlagSet, args []string) error {
	var pos []string
	for {
		if err := parseQuietly(set, args); err != nil {
			return err
		}
		if set.NArg() == 0 {
			break
		}
		pos = append(pos, set.Arg(0))
		args = set.Args()[1:]
	}
	return set.Parse(append([]string{"--"}, pos...))
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// show writes v as JSON with -o json, else text.
func (j *jobsRun) show(v any, text func(io.Writer)) error {
	if j.json {
		enc := json.NewEncoder(j.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	if text != nil {
		text(j.stdout)
	}
	return nil
}

// paramsFlag collects --param K=V.
type paramsFlag map[string]string

func (p paramsFlag) String() string { return "" }

func (p paramsFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("%q is not KEY=VALUE", s)
	}
	if _, dup := p[k]; dup {
		return fmt.Errorf("param %s given twice", k)
	}
	p[k] = v
	return nil
}

func submitFlags(set *flag.FlagSet) func(context.Context, *jobsRun, []string) error {
	service := set.String("service", "", "the service to run (required): one of the server's catalogue (docs/SPEC.md \"Service catalogue\"); an unknown one is refused with the list")
	params := paramsFlag{}
	set.Var(params, "param", "a param of the service as KEY=VALUE (repeatable)")
	input := set.String("input", "", "a file to upload as the job's input (streamed, its SHA-256 computed on the way)")
	idem := set.String("idempotency-key", "", "the Idempotency-Key (default: a random one; give your own to make a retried submit safe)")
	maxAttempts := set.Int("max-attempts", 0, "attempts before the job fails (1..10; default: the server's, 3)")
	window := set.Duration("admission-window", 0, "how long the job may wait to start (default: the server's)")
	wait := set.Bool("wait", false, "wait until the job ends; exit 0 only if it succeeded")
	download := set.String("download", "", "write the output to this file once the job succeeded (implies --wait)")
	return func(ctx context.Context, j *jobsRun, args []string) error {
		if len(args) > 0 {
			return usageError{fmt.Sprintf("submit takes no arguments, got %q (flags are --service, --param, --input...)", args)}
		}
		if *service == "" {
			return usageError{"--service is required"}
		}
		if *window%time.Second != 0 || *window < 0 {
			return usageError{fmt.Sprintf("--admission-window %s: want whole seconds", *window)}
		}
		req := client.CreateRequest{Service: *service, Params: params, IdempotencyKey: *idem}
		if *maxAttempts != 0 {
			req.MaxAttempts = maxAttempts
		}
		if *window != 0 {
			req.AdmissionWindowS = new(int64(*window / time.Second))
		}
		if *input != "" {
			st, err := os.Stat(*input)
			if err != nil {
				return usageError{fmt.Sprintf("--input: %v", err)}
			}
			if !st.Mode().IsRegular() {
				return usageError{fmt.Sprintf("--input %s: not a regular file", *input)}
			}
			bar := j.bar(st.Size(), "upload "+*input)
			up, err := j.c.UploadFile(ctx, *input, bar.progress)
			bar.finish()
			if err != nil {
				return err
			}
			j.note("uploaded %s: %d bytes, sha256 %s (%s)", *input, up.Bytes, up.SHA256, up.InputID)
			req.InputID = up.InputID
		}
		created, err := j.c.Create(ctx, req)
		if err != nil {
			return err
		}
		what := "created"
		if created.Replayed() {
			what = "already created (the same Idempotency-Key)"
		}
		j.note("job %s %s: %s", created.Job.ID, what, created.Job.Status)
		if !*wait && *download == "" {
			if j.json {
				return j.show(created.Job, nil)
			}
			fmt.Fprintln(j.stdout, created.Job.ID)
			return nil
		}
		return j.finish(ctx, created.Job.ID, *download)
	}
}

func listFlags(set *flag.FlagSet) func(context.Context, *jobsRun, []string) error {
	status := set.String("status", "", "only jobs of this status (queued, active, cancelling, succeeded, failed, cancelled)")
	limit := set.Int("limit", 50, "show at most this many jobs (0: all, paging through every page)")
	return func(ctx context.Context, j *jobsRun, args []string) error {
		if len(args) > 0 {
			return usageError{fmt.Sprintf("list takes no arguments, got %q", args)}
		}
		if *status != "" && !protocol.JobStatus(*status).Valid() {
			return usageError{fmt.Sprintf("--status %q is not a job status", *status)}
		}
		if *limit < 0 {
			return usageError{"--limit must be 0 or more"}
		}
		opts := client.ListOptions{Status: *status}
		if *limit > 0 {
			opts.Limit = min(*limit, 500)
		}
		jobs := []buyer.Job{}
		for job, err := range j.c.List(ctx, opts) {
			if err != nil {
				return err
			}
			jobs = append(jobs, job)
			if *limit > 0 && len(jobs) == *limit {
				break
			}
		}
		return j.show(jobs, func(w io.Writer) {
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tSTATUS\tSERVICE\tATTEMPTS\tCREATED\tFAILURE")
			for _, job := range jobs {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\t%s\t%s\n", job.ID, job.Status, job.Service, job.AttemptCount, job.MaxAttempts,
					job.CreatedAt.Format(time.RFC3339), job.FailureCode)
			}
			_ = tw.Flush()
		})
	}
}

// finish waits for the job, reports how it ended and, when it succeeded
// and out is set, downloads its output. A job that did not succeed is an
// error naming its failure code and message (exit 1).
func (j *jobsRun) finish(ctx context.Context, id, out string) error {
	d, err := j.c.Wait(ctx, id, client.WaitOptions{OnChange: func(d buyer.JobDetail) { j.note("%s", progressOf(d)) }})
	if err != nil {
		return err
	}
	if d.Status != protocol.JobSucceeded {
		if j.json {
			_ = j.show(d, nil)
		}
		return jobFailure(d)
	}
	if out != "" {
		if err := j.download(ctx, d, out); err != nil {
			return err
		}
	}
	return j.show(d, func(w io.Writer) { describeJob(w, d) })
}

// jobFailure words a job that ended without succeeding.
func jobFailure(d buyer.JobDetail) error {
	code, msg := d.FailureCode, ""
	if n := len(d.Attempts); n > 0 {
		last := d.Attempts[n-1]
		if code == "" {
			code = last.FailureCode
		}
		msg = last.FailureMessage
		if last.VerifyMessage != "" {
			msg = last.VerifyMessage
		}
	}
	if code == "" {
		code = string(d.Status)
	}
	if msg == "" {
		return fmt.Errorf("job %s %s: %s", d.ID, d.Status, code)
	}
	return fmt.Errorf("job %s %s: %s: %s", d.ID, d.Status, code, msg)
}

// download writes d's output to path, checked against its SHA-256.
func (j *jobsRun) download(ctx context.Context, d buyer.JobDetail, path string) error {
	if d.Output == nil {
		return fmt.Errorf("job %s is %s: it has no output to download", d.ID, d.Status)
	}
	bar := j.bar(d.Output.Bytes, "download "+path)
	n, err := j.c.DownloadFile(ctx, d, path, bar.progress)
	bar.finish()
	if err != nil {
		return err
	}
	j.note("downloaded %s: %d bytes, sha256 %s (matches the job's output)", path, n, d.Output.SHA256)
	return nil
}

// progressOf is one line of a job's progress.
func progressOf(d buyer.JobDetail) string {
	s := fmt.Sprintf("job %s: %s", d.ID, d.Status)
	if n := len(d.Attempts); n > 0 {
		a := d.Attempts[n-1]
		s += fmt.Sprintf(", attempt %d/%d %s", a.Number, d.MaxAttempts, a.Status)
		if a.FailureCode != "" {
			s += " (" + a.FailureCode + ")"
		}
	}
	return s
}

func describeJob(w io.Writer, d buyer.JobDetail) {
	fmt.Fprintf(w, "job      %s\nstatus   %s\nservice  %s\n", d.ID, d.Status, d.Service)
	if d.FailureCode != "" {
		fmt.Fprintf(w, "failure  %s\n", d.FailureCode)
	}
	fmt.Fprintf(w, "created  %s\nattempts %d of %d\n", d.CreatedAt.Format(time.RFC3339), d.AttemptCount, d.MaxAttempts)
	for _, a := range d.Attempts {
		fmt.Fprintf(w, "  #%d %s on device %s", a.Number, a.Status, a.DeviceID)
		if a.FailureCode != "" {
			fmt.Fprintf(w, " %s", a.FailureCode)
		}
		if m := a.VerifyMessage + a.FailureMessage; m != "" {
			fmt.Fprintf(w, ": %s", m)
		}
		fmt.Fprintln(w)
	}
	if d.Output != nil {
		fmt.Fprintf(w, "output   %d bytes, sha256 %s\n", d.Output.Bytes, d.Output.SHA256)
	}
}

// note writes a progress line on stderr.
func (j *jobsRun) note(format string, args ...any) {
	fmt.Fprintf(j.stderr, format+"\n", args...)
}

// transferBar shows an upload's or a download's bytes: a progress bar on
// a terminal, a line at each quarter otherwise.
type transferBar struct {
	bar      *progressbar.ProgressBar
	w        io.Writer
	what     string
	quarters int64
}

func (j *jobsRun) bar(total int64, what string) *transferBar {
	t := &transferBar{w: j.stderr, what: what}
	if j.tty {
		t.bar = progressbar.NewOptions64(total, progressbar.OptionSetWriter(j.stderr), progressbar.OptionShowBytes(true),
			progressbar.OptionSetDescription(what), progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionClearOnFinish())
	}
	return t
}

func (t *transferBar) progress(done, total int64) {
	if t.bar != nil {
		_ = t.bar.Set64(done)
		return
	}
	if total <= 0 {
		return
	}
	if q := done * 4 / total; q > t.quarters {
		t.quarters = q
		fmt.Fprintf(t.w, "%s: %d%% (%d of %d bytes)\n", t.what, q*25, done, total)
	}
}

func (t *transferBar) finish() {
	if t.bar != nil {
		_ = t.bar.Finish()
	}
}
