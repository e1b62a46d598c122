package scenarios

import (
	"bytes"
	"cmp"
	"context"
	"embed"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/protocol/buyer"
	"github.com/rendermac/rendermac/server/probe"
)

// Verification profiles with ffprobe, and the service catalogue (docs/SPEC.md,
// "Service catalogue" and Commit's verification). A script that declares
// `catalogue: NAME` runs its stacks on the catalogue file
// testdata/catalogues/NAME.json (parsed by protocol.ParseCatalogue, as the
// server's --catalogue is); one that declares `ffprobe: TIMEOUT` runs them
// with ffprobe verification on, bounded by TIMEOUT, through a slot: a path
// that holds a wrapper of the installed ffprobe until `ffprobe` puts a
// fake there (a hanging one, a flooding one, none at all).
//
// The outputs ffprobe judges are committed files (testdata/media), not
// rendered per run: their bytes, hence their SHA-256 and every verdict, are
// the same on every machine, and only ffprobe (the tool under test) must be
// installed, not an FFmpeg with libx265. They were made once with:
//
//	ffmpeg -f lavfi -i testsrc2=size=64x48:rate=5:duration=2 -c:v libx264 -pix_fmt yuv420p -preset veryslow -crf 45 -g 10 -map_metadata -1 h264_64x48_2s.mp4
//	ffmpeg -f lavfi -i testsrc2=size=64x48:rate=5:duration=2 -c:v libx265 -pix_fmt yuv420p -crf 45 -x265-params log-level=none -map_metadata -1 hevc_64x48_2s.mp4
//	ffmpeg -f lavfi -i sine=frequency=440:duration=2:sample_rate=8000 -c:a aac -b:a 8k -map_metadata -1 aac_2s.mp4
//	ffmpeg -i h264_64x48_2s.mp4 -c copy -map_metadata -1 h264_64x48_2s.mkv

//go:embed testdata/catalogues/*.json testdata/media/*
var verifyFiles embed.FS

func init() {
	scCommands["ffprobe"] = cmdFFprobe
	scCommands["view"] = cmdView
}

// NeedFFprobe: the scenario runs the installed ffprobe (header `ffprobe:`).
const NeedFFprobe = "ffprobe"

// ErrNeedsFFprobe is why a scenario that runs ffprobe was not run: none is
// installed. Under CI=true, which installs it (.ci/setup), the scenario runs
// anyway and fails.
var ErrNeedsFFprobe = errors.New("scenario runs ffprobe, which is not on PATH; install ffmpeg (bash .ci/setup does)")

// ffprobeMissing reports why no ffprobe can run here, or nil.
func ffprobeMissing() error {
	_, err := exec.LookPath("ffprobe")
	return err
}

// scMedia are the outputs `upload media=NAME` sends (testdata/media).
var scMedia = map[string]string{
	"h264": "h264_64x48_2s.mp4", // H.264 (libx264), 64x48, 2.0 s, one video stream
	"hevc": "hevc_64x48_2s.mp4", // HEVC (libx265), 64x48, 2.0 s, one video stream
	"aac":  "aac_2s.mp4",        // AAC audio alone, 2.0 s: no video stream
}

func mediaFile(name string) ([]byte, error) {
	file, ok := scMedia[name]
	if !ok {
		return nil, fmt.Errorf("media=%s: want one of %s", name, strings.Join(slices.Sorted(maps.Keys(scMedia)), ", "))
	}
	return verifyFiles.ReadFile("testdata/media/" + file)
}

// scVerify is a run's catalogue and ffprobe slot.
type scVerify struct {
	services []protocol.Service // nil: the built-in services
	prober   *probe.Prober      // nil: no ffprobe
	dir      string             // the slot's directory
	real     string             // the installed ffprobe
}

// setupVerify loads the script's catalogue and sets its ffprobe slot up
// with a wrapper of the installed ffprobe.
func (r *scRun) setupVerify() error {
	r.vf = &scVerify{}
	if r.s.catalogue != "" {
		data, err := catalogueFile(r.s.catalogue)
		if err != nil {
			return err
		}
		if r.vf.services, err = protocol.ParseCatalogue(data); err != nil {
			return fmt.Errorf("catalogue %s: %w", r.s.catalogue, err)
		}
	}
	if r.s.ffprobeTimeout == 0 {
		return nil
	}
	real, err := exec.LookPath("ffprobe")
	if err != nil {
		return fmt.Errorf("%w: %v", ErrNeedsFFprobe, err)
	}
	if r.vf.dir, err = os.MkdirTemp("", "rendermac-ffprobe-"); err != nil {
		return err
	}
	r.vf.real = real
	r.vf.prober = &probe.Prober{Path: filepath.Join(r.vf.dir, "ffprobe"), Timeout: r.s.ffprobeTimeout}
	r.tl.add(laneGateway, fmt.Sprintf("verification runs ffprobe (%s) with a %s timeout on catalogue %s", real, r.s.ffprobeTimeout,
		cmp.Or(r.s.catalogue, "built-in")))
	return r.vf.install("real", r.vf.wrapper())
}

// close kills what a hanging fake left behind (only when the server failed
// to kill its process group) and removes the slot.
func (v *scVerify) close() {
	if v == nil || v.dir == "" {
		return
	}
	for _, pid := range v.children() {
		if alive(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	_ = os.RemoveAll(v.dir)
}

func (v *scVerify) path(name string) string { return filepath.Join(v.dir, name) }

// install puts the script body in the slot ("" leaves the slot empty).
func (v *scVerify) install(what, body string) error {
	bin := v.path("ffprobe")
	if err := os.Remove(bin); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if body == "" {
		return nil
	}
	// Write aside and rename: exec of a file still open for writing fails
	// with ETXTBSY.
	tmp := v.path(".ffprobe-" + what)
	if err := os.WriteFile(tmp, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		return err
	}
	return os.Rename(tmp, bin)
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// wrapper runs the installed ffprobe with the server's arguments.
func (v *scVerify) wrapper() string { return "exec " + shellQuote(v.real) + ` "$@"` }

// children are the pids the hanging fake started.
func (v *scVerify) children() []int {
	raw, _ := os.ReadFile(v.path("children")) // none started: no file
	var out []int
	for _, f := range strings.Fields(string(raw)) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
			out = append(out, pid)
		}
	}
	return out
}

// alive reports whether pid runs (a zombie, killed and not yet reaped by
// whoever inherited it, does not).
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil { // no procfs (darwin): the signal's answer stands
		return true
	}
	// pid (comm) STATE ...: comm may hold spaces, so read after the last ')'.
	if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) {
		return stat[i+2] != 'Z' && stat[i+2] != 'X'
	}
	return true
}

// scProbeAnswer is what the installed ffprobe prints for the h264 medium
// (the server's -show_entries), which the fakes answer with.
const scProbeAnswer = `{"streams":[{"codec_name":"h264","codec_type":"video","width":64,"height":48,` +
	`"tags":{"encoder":"Lavc59.37.100 libx264"}}%s],"format":{"format_name":"mov,mp4,m4a,3gp,3g2,mj2","duration":"2.000000"}}`

// scFloodBytes is the size of the flooding fake's answer: over ffprobe's
// 1 MiB output cap (docs/SPEC.md), well under what a server that took it
// whole would notice.
const scFloodBytes = 3 << 19

// cmdFFprobe swaps what runs in the ffprobe slot, or checks what ran:
//
//	ffprobe real      the installed ffprobe (the slot's start)
//	ffprobe absent    no program at the path: ffprobe is missing
//	ffprobe hang      a program that starts a child and waits for it forever
//	ffprobe flood     answers the h264 medium's JSON padded past 1.5 MiB
//	ffprobe answer    answers the h264 medium's JSON, recording its arguments
//	ffprobe reaped    every child the hanging program started is gone
//	ffprobe args      the recorded arguments bound ffprobe as docs/SPEC.md says
//
// Example: ffprobe hang
func cmdFFprobe(r *scRun, st scStep) error {
	v := r.vf
	if v == nil || v.dir == "" {
		return errors.New("ffprobe: the script has no `ffprobe:` header")
	}
	var body string
	switch verb := arg(st, 0); verb {
	case "real":
		body = v.wrapper()
	case "absent":
	case "hang":
		body = "sleep 600 &\necho $! >> " + shellQuote(v.path("children")) + "\nwait"
	case "flood":
		pad := strings.Repeat(`,{"codec_type":"data","codec_name":"bin_data"}`, scFloodBytes/46)
		if err := os.WriteFile(v.path("flood.json"), fmt.Appendf(nil, scProbeAnswer, pad), 0o644); err != nil {
			return err
		}
		body = "exec cat " + shellQuote(v.path("flood.json"))
	case "answer":
		if err := os.WriteFile(v.path("answer.json"), fmt.Appendf(nil, scProbeAnswer, ""), 0o644); err != nil {
			return err
		}
		body = `printf '%s\n' "$@" > ` + shellQuote(v.path("args")) + "\nexec cat " + shellQuote(v.path("answer.json"))
	case "reaped":
		return r.ffprobeReaped()
	case "args":
		return r.ffprobeArgs()
	default:
		return fmt.Errorf("want: ffprobe real|absent|hang|flood|answer|reaped|args, got %q", verb)
	}
	r.tl.add(laneGateway, "ffprobe slot: "+arg(st, 0))
	return v.install(arg(st, 0), body)
}

// ffprobeReaped checks that the children of the hanging fake died with it:
// the server kills ffprobe's whole process group at the timeout. A kill is
// delivered asynchronously, so the check waits up to the frame timeout.
func (r *scRun) ffprobeReaped() error {
	kids := r.vf.children()
	if len(kids) == 0 {
		return errors.New("ffprobe reaped: the hanging ffprobe started no child (did it run?)")
	}
	deadline := time.Now().Add(r.timeout)
	for _, pid := range kids {
		for alive(pid) {
			if time.Now().After(deadline) {
				return fmt.Errorf("ffprobe reaped: child %d of the timed-out ffprobe still runs: its process group was not killed", pid)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	r.count("ffprobe.reaped", int64(len(kids)))
	r.tl.add(laneGateway, fmt.Sprintf("ffprobe's %d child(ren) died with it", len(kids)))
	return nil
}

// mp4Demuxers are the MP4 family's demuxers: the mov demuxer's names.
var mp4Demuxers = []string{"mov", "mp4", "m4a", "3gp", "3g2", "mj2"}

// ffprobeArgs checks the arguments the server ran the answering fake with
// (docs/SPEC.md: -probesize and -analyzeduration capping what it reads,
// only the MP4 family's demuxers and the file protocol), then runs the
// installed ffprobe with them on a Matroska file, which they must make it
// refuse, and without the whitelists, which must read it: the arguments
// do on this ffprobe what the contract says.
func (r *scRun) ffprobeArgs() error {
	raw, err := os.ReadFile(r.vf.path("args"))
	if err != nil {
		return fmt.Errorf("ffprobe args: none recorded (did `ffprobe answer` run?): %w", err)
	}
	args := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
	value := func(flag string) (string, bool) {
		i := slices.Index(args, flag)
		if i < 0 || i+1 >= len(args) {
			return "", false
		}
		return args[i+1], true
	}
	var problems []string
	if p, ok := value("-protocol_whitelist"); !ok || p != "file" {
		problems = append(problems, fmt.Sprintf("-protocol_whitelist: want file, got %q", p))
	}
	if f, ok := value("-format_whitelist"); !ok || f == "" || slices.ContainsFunc(strings.Split(f, ","), func(d string) bool {
		return !slices.Contains(mp4Demuxers, d)
	}) {
		problems = append(problems, fmt.Sprintf("-format_whitelist: want the MP4 family's demuxers only (%s), got %q",
			strings.Join(mp4Demuxers, ","), f))
	}
	for _, flag := range []string{"-probesize", "-analyzeduration"} {
		if n, ok := value(flag); !ok || !positive(n) {
			problems = append(problems, fmt.Sprintf("%s: want a positive bound, got %q", flag, n))
		}
	}
	in, ok := value("-i")
	if !ok || !strings.HasPrefix(in, "file:") {
		problems = append(problems, fmt.Sprintf("-i: want a file: URL, got %q", in))
	}
	if len(problems) > 0 {
		return fmt.Errorf("ffprobe args %q: %s", args, strings.Join(problems, "; "))
	}
	mkv, err := verifyFiles.ReadFile("testdata/media/h264_64x48_2s.mkv")
	if err != nil {
		return err
	}
	other := r.vf.path("other.mkv")
	if err := os.WriteFile(other, mkv, 0o644); err != nil {
		return err
	}
	swapped := slices.Clone(args)
	swapped[slices.Index(swapped, "-i")+1] = "file:" + other
	if out, err := r.runFFprobe(swapped); err == nil {
		return fmt.Errorf("ffprobe args: with the server's arguments ffprobe read a Matroska file: %s", out)
	}
	open := slices.Clone(swapped)
	for _, flag := range []string{"-format_whitelist", "-protocol_whitelist"} {
		i := slices.Index(open, flag)
		open = slices.Delete(open, i, i+2)
	}
	if out, err := r.runFFprobe(open); err != nil {
		return fmt.Errorf("ffprobe args: without the whitelists ffprobe cannot read the Matroska file either (%v: %s), so its refusal proves nothing", err, out)
	}
	r.count("ffprobe.args", 1)
	r.tl.add(laneGateway, "ffprobe's arguments bound it (probesize, analyzeduration, file protocol, MP4 demuxers): it refuses a Matroska file that it reads without them")
	return nil
}

func positive(s string) bool {
	n, err := strconv.ParseInt(s, 10, 64)
	return err == nil && n > 0
}

// runFFprobe runs the installed ffprobe, bounded by the frame timeout.
func (r *scRun) runFFprobe(args []string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(r.ctx, r.timeout)
	defer cancel()
	return exec.CommandContext(ctx, r.vf.real, args...).CombinedOutput()
}

// cmdView reads the job through GET /v1/jobs/{id} as its buyer and checks
// what the view shows: status=, and of attempt N (default the last)
// encoder= and verify_message= ("-": absent), and param.KEY= the stored
// param's canonical text.
// Example: view j2 "verify_message=profile_mismatch: codec: want h264, got hevc"
func cmdView(r *scRun, st scStep) error {
	id, gw, err := r.jobVia(st, 0)
	if err != nil {
		return err
	}
	job, err := r.buyer(gw.baseURL(), r.apiKey).Get(r.ctx, id)
	if err != nil {
		return fmt.Errorf("view %s: %w", arg(st, 0), err)
	}
	var at buyer.Attempt
	if len(job.Attempts) > 0 {
		at = job.Attempts[len(job.Attempts)-1]
	}
	if n := st.opt("attempt", ""); n != "" {
		i, err := strconv.Atoi(n)
		if err != nil || i < 1 || i > len(job.Attempts) {
			return fmt.Errorf("view %s: attempt=%s: the job has %d attempts", arg(st, 0), n, len(job.Attempts))
		}
		at = job.Attempts[i-1]
	}
	got := map[string]string{"status": string(job.Status), "encoder": at.Encoder, "verify_message": at.VerifyMessage}
	for k, v := range job.Params {
		got["param."+k] = v
	}
	var seen []string
	for _, k := range slices.Sorted(maps.Keys(st.kv)) {
		if k == "attempt" || k == "via" {
			continue
		}
		want, have := st.kv[k], got[k]
		if _, known := got[k]; !known && !strings.HasPrefix(k, "param.") {
			return fmt.Errorf("view: unknown field %q (status, encoder, verify_message, param.KEY)", k)
		}
		if want == "-" {
			want = ""
		}
		if have != want {
			return fmt.Errorf("view %s: %s: want %q, got %q", arg(st, 0), k, want, have)
		}
		seen = append(seen, k+"="+have)
	}
	r.tl.add(laneGateway, fmt.Sprintf("buyer -> GET /v1/jobs/%s: %s", arg(st, 0), strings.Join(seen, " ")))
	return nil
}
