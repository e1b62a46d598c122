package scenarios

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rendermac/rendermac/harness/deviceclient"
	"github.com/rendermac/rendermac/harness/targets"
	"github.com/rendermac/rendermac/internal/mp4"
	"github.com/rendermac/rendermac/protocol"
)

// scAgent is one agent identity: a paired device (created at its first
// connect) and its current WebSocket session, spoken frame by frame through
// deviceclient. It remembers the offers it was given, so later steps can
// echo their identities and token, or deliberately not.
type scAgent struct {
	name, deviceID, token string
	slots                 int
	client                *deviceclient.Client
	session               int
	clients               []*deviceclient.Client
	held                  map[string]string // job name -> the latest attempt it was offered
	got                   []scGot
}

// scGot is a frame an agent received, as `reached frame` matches it.
type scGot struct {
	session int
	typ     string
	detail  []string
}

func (r *scRun) agent(name string) (*scAgent, error) {
	a := r.agents[name]
	if a == nil || a.client == nil {
		return nil, fmt.Errorf("agent %s is not connected", name)
	}
	return a, nil
}

func (r *scRun) closeAgents() {
	for _, a := range r.agents {
		for _, c := range a.clients {
			c.Close()
		}
		a.clients, a.client = nil, nil
	}
}

// cmdConnect dials the gateway as the agent's device (paired with `slots`
// slots on first use) and says hello with `free` free slots, running the
// scenario's service or the comma-separated `services`. dial=no only
// pairs the device: it exists, never connected (an operator acts on it
// while it is away).
// Example: connect a1 slots=1 free=0 gateway=gw2
// Example: connect a2 services=ffmpeg.h264_720p
// Example: connect a3 dial=no
func cmdConnect(r *scRun, st scStep) error {
	if len(st.args) != 1 {
		return errors.New("want: connect AGENT [slots=N] [free=N] [services=S,...] [gateway=G] [dial=no]")
	}
	services := strings.Split(st.opt("services", scService), ",")
	a := r.agents[st.args[0]]
	if a == nil {
		slots, err := strconv.Atoi(st.opt("slots", "1"))
		if err != nil {
			return err
		}
		if r.real[st.args[0]] != nil {
			return fmt.Errorf("%s is a shipped agent (agent start)", st.args[0])
		}
		a = &scAgent{name: st.args[0], slots: slots, held: map[string]string{}}
		if a.deviceID, a.token, err = r.pairDevice(a.name, services, a.slots); err != nil {
			return err
		}
		r.agents[a.name] = a
	}
	if st.opt("dial", "yes") == "no" {
		r.tl.add(laneAgent, a.name+" paired, not connected")
		return nil
	}
	slots, err := strconv.Atoi(st.opt("slots", strconv.Itoa(a.slots)))
	if err != nil {
		return err
	}
	free, err := strconv.Atoi(st.opt("free", strconv.Itoa(slots)))
	if err != nil {
		return err
	}
	gw, err := r.stack(st.opt("gateway", "gw1"))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(r.ctx, r.timeout)
	defer cancel()
	c, _, err := deviceclient.Dial(ctx, gw.wsURL(), a.token)
	if err != nil {
		return fmt.Errorf("dial %s: %w", gw.name, err)
	}
	a.clients = append(a.clients, c)
	if _, err := c.Hello(ctx, services, slots, free); err != nil {
		return err
	}
	a.client = c
	a.session++
	r.tl.add(laneAgent, fmt.Sprintf("%s connected to %s (session %d): hello services=%s slots_total=%d slots_free=%d, welcome",
		a.name, gw.name, a.session, strings.Join(services, ","), slots, free))
	return nil
}

// cmdDrop cuts the agent's connection without a close frame: a crash, a
// Wi-Fi loss. What the agent held in memory (its tokens) is kept by the
// script; a restarted agent simply does not use it.
// Example: drop a1
func cmdDrop(r *scRun, st scStep) error {
	a, err := r.agent(arg(st, 0))
	if err != nil {
		return err
	}
	a.client.Drop()
	a.client = nil
	r.tl.add(laneAgent, a.name+" dropped its connection (no close frame)")
	return nil
}

// cmdClose ends one of the agent's sessions (the current one unless
// session= names another) with a normal closure, 1000, as the shipped agent
// does when it stops: the gateway then knows the device acts on nothing
// more sent on that session.
// Example: close a1
// Example: close a1 session=1
func cmdClose(r *scRun, st scStep) error {
	a := r.agents[arg(st, 0)]
	if a == nil || len(a.clients) == 0 {
		return fmt.Errorf("agent %s never connected", arg(st, 0))
	}
	n, err := optInt(st, "session", a.session)
	if err != nil {
		return err
	}
	if n < 1 || n > len(a.clients) {
		return fmt.Errorf("close: agent %s has sessions 1..%d, not %d", a.name, len(a.clients), n)
	}
	c := a.clients[n-1]
	c.Close()
	if c == a.client {
		a.client = nil
	}
	r.tl.add(laneAgent, fmt.Sprintf("%s closed session %d (normal closure, 1000)", a.name, n))
	return nil
}

// cmdSlots reports the agent's free slots. frame= sends a malformed slots
// frame instead, raw, type first as Encode writes it: case (slots_free
// followed by SLOTS_FREE=0, a name in another case) or missing (no
// slots_free), each one the gateway must answer with bad_message.
// Example: slots a1 free=1
// Example: slots a1 free=1 frame=case
func cmdSlots(r *scRun, st scStep) error {
	a, err := r.agent(arg(st, 0))
	if err != nil {
		return err
	}
	free, err := strconv.Atoi(st.opt("free", "1"))
	if err != nil {
		return err
	}
	label := fmt.Sprintf("slots free=%d", free)
	var raw string
	switch bad := st.opt("frame", ""); bad {
	case "":
		return r.send(a, a, &protocol.Slots{Type: protocol.TypeSlots, SlotsFree: free}, label)
	case "case":
		raw = fmt.Sprintf(`{"type":"slots","slots_free":%d,"SLOTS_FREE":0}`, free)
	case "missing":
		raw = `{"type":"slots"}`
	default:
		return fmt.Errorf("frame=%q: want case or missing", bad)
	}
	if a.client == nil {
		return fmt.Errorf("agent %s is not connected", a.name)
	}
	ctx, cancel := context.WithTimeout(r.ctx, r.timeout)
	defer cancel()
	r.tl.add(laneAgent, a.name+" -> "+raw)
	return a.client.SendRaw(ctx, []byte(raw))
}

// cmdProgress reports a phase for the agent's attempt of a job; epoch=,
// attempt= and via= (send it on another agent's session: a forgery) alter
// what is echoed.
// Example: progress a1 j1 uploading epoch=2 via=a2
func cmdProgress(r *scRun, st scStep) error {
	a, o, via, err := r.frameParts(st, 3)
	if err != nil {
		return err
	}
	p := deviceclient.Progress(o, protocol.AttemptStatus(st.args[2]))
	if p.LeaseEpoch, err = optInt(st, "epoch", o.LeaseEpoch); err != nil {
		return err
	}
	return r.send(a, via, p, fmt.Sprintf("progress %s %s epoch=%d", r.name(o.AttemptID), p.Phase, p.LeaseEpoch))
}

// cmdCommit commits the agent's attempt with what it uploaded (or, if it
// uploaded nothing, the output it would have); token=wrong sends a forged
// token, token=j1#1 the token of another attempt; key=NAME claims the
// output at outputs/{job}/NAME.mp4, not the attempt's own key (with the
// size and digest of what it uploaded there).
// Example: commit a1 j1 token=wrong
// Example: commit a1 j1 key=elsewhere
func cmdCommit(r *scRun, st scStep) error {
	a, o, via, err := r.frameParts(st, 2)
	if err != nil {
		return err
	}
	r.mu.Lock()
	out, ok := r.outputs[o.AttemptID]
	r.mu.Unlock()
	if !ok {
		out = targets.SyntheticOutput(o.JobID, o.AttemptID)
	}
	c := deviceclient.Commit(o, out)
	note := tokenNote(st)
	if k := st.opt("key", ""); k != "" {
		c.Output.Key = "outputs/" + o.JobID + "/" + k + ".mp4"
		note += " claiming key outputs/" + r.name(o.JobID) + "/" + k + ".mp4"
	}
	if c.LeaseEpoch, err = optInt(st, "epoch", o.LeaseEpoch); err != nil {
		return err
	}
	if c.CommitToken, err = r.token(st, o); err != nil {
		return err
	}
	return r.send(a, via, c, fmt.Sprintf("commit %s epoch=%d%s", r.name(o.AttemptID), c.LeaseEpoch, note))
}

// cmdFail gives the agent's attempt up with a failure code.
// Example: fail a1 j1 download_failed token=wrong
// Example: fail a1 j1 runner_failed "message=exited 1 TOKEN"
func cmdFail(r *scRun, st scStep) error {
	a, o, via, err := r.frameParts(st, 3)
	if err != nil {
		return err
	}
	f := deviceclient.Fail(o, protocol.FailureCode(st.args[2]))
	if f.LeaseEpoch, err = optInt(st, "epoch", o.LeaseEpoch); err != nil {
		return err
	}
	if f.CommitToken, err = r.token(st, o); err != nil {
		return err
	}
	// message= is the frame's message; TOKEN in it stands for the
	// attempt's commit token, which the control plane must not keep.
	f.Message = strings.ReplaceAll(st.opt("message", ""), "TOKEN", o.CommitToken)
	return r.send(a, via, f, fmt.Sprintf("fail %s %s%s", r.name(o.AttemptID), f.FailureCode, tokenNote(st)))
}

// cmdUpload PUTs the attempt's output through the offer's signed upload
// URL, as the agent does: a small valid MP4, or with `corrupt` one whose
// moov box is renamed (honest size and digest, broken media), or with
// `nomoov`, `notrack` or `truncated` one broken as scenario_content.go
// says; `other` sends another valid MP4 than a plain upload does; with
// `refused` the upload must be answered with an error status (with
// status=N that status, with code=C an error body of that code); with
// `late` any answer is taken (a refusal is counted as upload.refused) and
// the run's final checks judge what the store holds. The PUT is
// create-only (If-None-Match: *) as the agent sends it, unless `bare`: a
// grant holder that drops the condition, which an S3 grant signs. A
// bucket's refusal of a second create-only write (412 PreconditionFailed)
// is read as the contract's 409 output_sealed (contractRefusal); every
// output_sealed answer counts as upload.output_sealed.
// Example: upload a1 j1 corrupt
// Example: upload a1 j1 other refused status=409 code=output_sealed
// Example: upload a1 j1 notrack
// Example: upload a1 j1 other late
// Example: upload a1 j1 other late bare store=s3
// Example: upload a1 j1 media=hevc
func cmdUpload(r *scRun, st scStep) error {
	a, o, _, err := r.frameParts(st, 2)
	if err != nil {
		return err
	}
	words := st.args[2:]
	data := mp4.Synthetic(mp4.SyntheticParams{Seed: o.AttemptID, MdatBytes: 2048})
	what := "valid MP4"
	if m := st.opt("media", ""); m != "" { // an encoded file for ffprobe (scenario_verify.go)
		if data, err = mediaFile(m); err != nil {
			return err
		}
		what = "MP4 " + m
	}
	if slices.Contains(words, "other") { // another valid file than the one a plain upload sends
		data = mp4.Synthetic(mp4.SyntheticParams{Seed: o.AttemptID + "/other", MdatBytes: 1536})
		what = "another valid MP4"
	}
	if slices.Contains(words, "corrupt") {
		data = bytes.Replace(data, []byte("moov"), []byte("free"), 1)
		what = "MP4 without moov"
	}
	broken, how, err := breakOutput(words, data)
	if err != nil {
		return fmt.Errorf("upload: derive the broken output: %w", err)
	}
	if how != "" {
		data, what = broken, how
	}
	req, err := http.NewRequestWithContext(r.ctx, http.MethodPut, o.Output.UploadURL, bytes.NewReader(data))
	if err != nil {
		return err
	}
	bare := slices.Contains(words, "bare")
	if !bare { // create-only, as the agent sends it
		req.Header.Set(protocol.OutputPutCondition, protocol.OutputPutCreateOnly)
	} else {
		what += " without " + protocol.OutputPutCondition
	}
	resp, err := r.httpc.Do(req)
	if err != nil {
		return fmt.Errorf("upload: %w", err)
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	_ = resp.Body.Close()
	status, code := contractRefusal(resp.StatusCode, body)
	r.tl.add(laneAgent, fmt.Sprintf("%s PUT output of %s (%s, %d bytes): %d %s%s", a.name, r.name(o.AttemptID), what,
		len(data), resp.StatusCode, bytes.TrimSpace(body), readAs(resp.StatusCode, status, code)))
	if code == string(protocol.CodeOutputSealed) {
		r.count("upload.output_sealed", 1)
	}
	refused := slices.Contains(words, "refused")
	if slices.Contains(words, "late") { // whatever the answer: the final checks judge what is stored
		if status/100 != 2 {
			r.count("upload.refused", 1)
		} else if r.s3 != nil && r.landed(o.Output.Key, data) {
			// The bucket took it: the late bytes are at the attempt's key,
			// which nothing may serve.
			r.count("upload.landed", 1)
		}
		return nil
	}
	switch {
	case refused && status/100 == 2:
		return fmt.Errorf("upload: expected the upload to be refused, got HTTP %d", resp.StatusCode)
	case refused && st.opt("code", "") != "" && code != st.opt("code", ""),
		refused && st.opt("status", "") != "" && st.opt("status", "") != strconv.Itoa(status):
		return fmt.Errorf("upload: expected a refusal %s %s, got HTTP %d: %s", st.opt("status", ""), st.opt("code", ""),
			resp.StatusCode, body)
	case refused:
		if c := st.opt("code", ""); c != "" {
			r.reply(fmt.Sprintf("upload refused (%d %s)", status, c))
		}
		r.count("upload.refused", 1)
		return nil
	case status/100 != 2:
		return fmt.Errorf("upload: HTTP %d: %s", resp.StatusCode, body)
	}
	sum := sha256.Sum256(data)
	r.mu.Lock()
	r.outputs[o.AttemptID] = protocol.Output{Key: o.Output.Key, Bytes: int64(len(data)), SHA256: hex.EncodeToString(sum[:])}
	r.mu.Unlock()
	return nil
}

// frameParts resolves `CMD AGENT JOB ...`: the agent, the offer it holds
// for the job (or attempt=J#n), and the session to send on (via=).
func (r *scRun) frameParts(st scStep, nargs int) (a *scAgent, o *protocol.LeaseOffer, via *scAgent, err error) {
	if len(st.args) < nargs {
		return nil, nil, nil, fmt.Errorf("want %d arguments", nargs)
	}
	if a = r.agents[st.args[0]]; a == nil {
		return nil, nil, nil, fmt.Errorf("no agent %s", st.args[0])
	}
	name := st.opt("attempt", a.held[st.args[1]])
	r.mu.Lock()
	o = r.offers[name]
	r.mu.Unlock()
	if o == nil {
		return nil, nil, nil, fmt.Errorf("%s was offered no attempt %q of %s", a.name, name, st.args[1])
	}
	via = a
	if v := st.opt("via", ""); v != "" {
		if via = r.agents[v]; via == nil {
			return nil, nil, nil, fmt.Errorf("no agent %s", v)
		}
	}
	return a, o, via, nil
}

// token is the commit token a frame carries: the offer's, a forged one, or
// another attempt's.
func (r *scRun) token(st scStep, o *protocol.LeaseOffer) (string, error) {
	switch t := st.opt("token", ""); t {
	case "":
		return o.CommitToken, nil
	case "wrong":
		b := make([]byte, 24)
		_, _ = rand.Read(b)
		return base64.RawURLEncoding.EncodeToString(b), nil
	default:
		r.mu.Lock()
		other := r.offers[t]
		r.mu.Unlock()
		if other == nil {
			return "", fmt.Errorf("token=%s: no such attempt was offered", t)
		}
		return other.CommitToken, nil
	}
}

func tokenNote(st scStep) string {
	if t := st.opt("token", ""); t != "" {
		return " token=" + t
	}
	return ""
}

// send writes msg on via's session (via == a unless forging); the label
// never includes a token.
func (r *scRun) send(a, via *scAgent, msg any, label string) error {
	if via.client == nil {
		return fmt.Errorf("agent %s is not connected", via.name)
	}
	ctx, cancel := context.WithTimeout(r.ctx, r.timeout)
	defer cancel()
	if via != a {
		label += " (forged on " + via.name + "'s session)"
	}
	r.tl.add(laneAgent, via.name+" -> "+label)
	return via.client.Send(ctx, msg)
}

// cmdExpect takes the agent's next frames and requires them to match the
// given frames, in any order when several are joined by `+`. A frame is a
// type and words it must carry: a job name matches any of its attempts.
// within= bounds the wait (default: the frame timeout) and logs how long
// after the last sweep the frames came.
// Example: expect a1 cancel j1 + commit_rejected job_cancelled
// Example: expect a1 lease_offer j1#2 within=2s
// Example: expect a1 commit_rejected verification_failed "message=the output failed verification: profile_mismatch: codec: want h264, got hevc"
func cmdExpect(r *scRun, st scStep) error {
	a, err := r.agent(arg(st, 0))
	if err != nil {
		return err
	}
	wait := r.timeout
	if v := st.opt("within", ""); v != "" {
		if wait, err = time.ParseDuration(v); err != nil || wait <= 0 {
			return fmt.Errorf("expect: within=%q: want a positive duration such as 2s", v)
		}
	}
	var specs [][]string
	cur := []string{}
	for _, w := range st.words[1:] {
		if strings.HasPrefix(w, "within=") || strings.HasPrefix(w, "store=") {
			continue
		}
		if w == "+" {
			specs, cur = append(specs, cur), []string{}
			continue
		}
		cur = append(cur, w)
	}
	specs = append(specs, cur)
	// Frames of one `+` group may arrive in either order; they are
	// recorded in the script's order, so that the card's observed text
	// does not depend on which came first (--no-timings cards must be
	// byte-identical run to run).
	order := make([]int, len(specs))
	for i := range order {
		order[i] = i
	}
	rendered := make([]string, len(specs))
	defer func() {
		for _, s := range rendered {
			if s != "" {
				r.reply(s)
			}
		}
	}()
	var got []string
	for range rendered {
		typ, detail, err := r.next(a, wait)
		if err != nil {
			return fmt.Errorf("expected %s within %v, got %v: %w", joinSpecs(specs), wait, got, err)
		}
		got = append(got, typ+" "+strings.Join(detail, " "))
		i := matchSpec(specs, typ, detail)
		if i < 0 {
			return fmt.Errorf("expected %s, got %s", joinSpecs(specs), strings.Join(got, "; "))
		}
		if typ != "welcome" && typ != "lease_offer" && typ != "progress_ok" {
			rendered[order[i]] = typ
			// A verdict's message is rendered only where the spec asked for it.
			words := slices.DeleteFunc(slices.Clone(detail[:len(detail)-1]), func(w string) bool {
				return strings.HasPrefix(w, "message=") && !slices.Contains(specs[i], w)
			})
			if len(words) > 0 {
				rendered[order[i]] += "(" + strings.Join(words, " ") + ")"
			}
		}
		specs = append(specs[:i:i], specs[i+1:]...)
		order = append(order[:i:i], order[i+1:]...)
	}
	if wait != r.timeout && !r.sweptAt.IsZero() {
		r.tl.add(laneAgent, fmt.Sprintf("%s: %s arrived %v after the last sweep (within %v)", a.name,
			strings.Join(got, "; "), time.Since(r.sweptAt).Round(time.Microsecond), wait))
	}
	return nil
}

// cmdNothing requires that the agent receives no frame for a while: no
// offer overtook a result, no token was re-sent.
// Example: nothing a1 200ms
func cmdNothing(r *scRun, st scStep) error {
	a, err := r.agent(arg(st, 0))
	if err != nil {
		return err
	}
	d, err := time.ParseDuration(arg(st, 1))
	if err != nil {
		return err
	}
	typ, detail, err := r.next(a, d)
	if errors.Is(err, context.DeadlineExceeded) {
		r.tl.add(laneAgent, fmt.Sprintf("%s received nothing for %s", a.name, d))
		return nil
	}
	if err != nil {
		return err
	}
	return fmt.Errorf("expected no frame for %s, got %s %s", d, typ, strings.Join(detail, " "))
}

// next receives one frame (or the session's end, as type "closed") and
// records it: offers are registered under their script names.
func (r *scRun) next(a *scAgent, wait time.Duration) (string, []string, error) {
	ctx, cancel := context.WithTimeout(r.ctx, wait)
	defer cancel()
	msg, err := a.client.Next(ctx)
	var typ string
	var detail []string
	switch {
	case errors.Is(err, deviceclient.ErrClosed):
		code, _ := a.client.Wait(ctx)
		typ, detail = "closed", []string{strconv.Itoa(int(code)), "session"}
	case err != nil:
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return "", nil, context.DeadlineExceeded
		}
		return "", nil, err
	default:
		typ, detail = r.describe(a.name, a.held, msg)
	}
	a.got = append(a.got, scGot{session: a.session, typ: typ, detail: detail})
	r.tl.add(laneAgent, fmt.Sprintf("%s <- %s %s", a.name, typ, strings.Join(detail, " ")))
	return typ, detail, nil
}

// describe renders a gateway frame as its type and the words a spec can
// match; the last word is the attempt it is about.
func (r *scRun) describe(agent string, held map[string]string, msg any) (string, []string) {
	switch m := msg.(type) {
	case *protocol.Welcome:
		return protocol.TypeWelcome, []string{agent}
	case *protocol.LeaseOffer:
		return protocol.TypeLeaseOffer, []string{r.registerOffer(held, m)}
	case *protocol.ProgressOK:
		return protocol.TypeProgressOK, []string{r.name(m.AttemptID)}
	case *protocol.LeaseConflict:
		return protocol.TypeLeaseConflict, []string{string(m.Reason), r.name(m.AttemptID)}
	case *protocol.Cancel:
		return protocol.TypeCancel, []string{r.name(m.AttemptID)}
	case *protocol.Drain:
		return protocol.TypeDrain, []string{agent}
	case *protocol.CommitOK:
		return protocol.TypeCommitOK, []string{r.name(m.AttemptID)}
	case *protocol.CommitRejected:
		if m.Message != "" && m.Code == protocol.CodeVerificationFailed { // the verdict, which a spec may match
			return protocol.TypeCommitRejected, []string{string(m.Code), "message=" + m.Message, r.name(m.AttemptID)}
		}
		return protocol.TypeCommitRejected, []string{string(m.Code), r.name(m.AttemptID)}
	case *protocol.FailOK:
		return protocol.TypeFailOK, []string{"requeued=" + strconv.FormatBool(m.Requeued), r.name(m.AttemptID)}
	case *protocol.FailRejected:
		return protocol.TypeFailRejected, []string{string(m.Code), r.name(m.AttemptID)}
	case *protocol.ErrorMessage:
		return protocol.TypeError, []string{m.Code, "-"}
	}
	return fmt.Sprintf("%T", msg), []string{"-"}
}

// registerOffer names an offer J#n after its job and attempt number and
// records it as the latest attempt of that job its agent holds.
func (r *scRun) registerOffer(held map[string]string, o *protocol.LeaseOffer) string {
	job := r.name(o.JobID)
	name := fmt.Sprintf("%s#%d", job, o.AttemptNumber)
	r.setName(o.AttemptID, name)
	r.mu.Lock()
	r.offers[name] = o
	r.mu.Unlock()
	held[job] = name
	return name
}

// matchSpec returns the index of the first spec the frame satisfies, or -1.
func matchSpec(specs [][]string, typ string, detail []string) int {
	for i, spec := range specs {
		if len(spec) == 0 || spec[0] != typ {
			continue
		}
		ok := true
		for _, want := range spec[1:] {
			ok = ok && matchWord(want, detail)
		}
		if ok {
			return i
		}
	}
	return -1
}

func matchWord(want string, detail []string) bool {
	for _, d := range detail {
		if d == want || strings.HasPrefix(d, want+"#") {
			return true
		}
	}
	return false
}

func joinSpecs(specs [][]string) string {
	parts := make([]string, len(specs))
	for i, s := range specs {
		parts[i] = strings.Join(s, " ")
	}
	return strings.Join(parts, " + ")
}

// keyName renders an artifact key by its attempt's or job's script name.
func (r *scRun) keyName(key string) string {
	parts := strings.Split(key, "/")
	switch {
	case len(parts) == 3 && parts[0] == "outputs":
		return "output of " + r.name(strings.TrimSuffix(parts[2], ".mp4"))
	case len(parts) == 2 && parts[0] == "inputs":
		return "input of " + r.name(parts[1])
	}
	return key
}

func arg(st scStep, i int) string {
	if i < len(st.args) {
		return st.args[i]
	}
	return ""
}

func optInt(st scStep, key string, def int) (int, error) {
	v, ok := st.kv[key]
	if !ok {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("%s=%s: %w", key, v, err)
	}
	return n, nil
}
