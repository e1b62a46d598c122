package scenarios

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/coder/websocket"

	"github.com/rendermac/rendermac/agent"
	"github.com/rendermac/rendermac/agent/runner"
	"github.com/rendermac/rendermac/internal/clock"
	"github.com/rendermac/rendermac/internal/tcpproxy"
	"github.com/rendermac/rendermac/protocol"
)

// The shipped agent in the catalogue. `agent start` runs package agent's
// Agent in this process (its own session, dispatch, pipeline and transfer
// code, memory kept across offers and reconnects) with the built-in
// synthetic.mp4 runner, against a scenario stack. Its WebSocket goes
// through scRelay, a recording relay in front of the gateway: every frame
// both ways is decoded and kept, so the agent's rules are checked on the
// wire (checkWire, run for every such agent at the end of the scenario)
// without a hook in the agent or the gateway. The relay can also cut the
// session, or refuse reconnects, as a network would.
//
// The agent runs on the real clock (its heartbeats and reconnect backoff);
// the stacks keep the pinned clock. The runner can be held (`hold`): each
// run waits for an `agent release`, which is how a script puts a fault
// between the agent's phases.

// Bounds of the in-process agent: quick reconnects, a short drain.
const (
	realAgentBackoffBase = 20 * time.Millisecond
	realAgentBackoffMax  = 200 * time.Millisecond
	realAgentShutdown    = 3 * time.Second
)

// scRealAgent is one shipped agent running in the scenario's process.
type scRealAgent struct {
	name, deviceID, token string
	relay                 *scRelay
	gate                  *scGatedRunner
	agent                 *agent.Agent
	cfg                   agent.Config
	clock                 *scAgentClock
	disk                  *scDisk
	workDir               string
	// record is runner=record's directory (what its program saw).
	record string
	stop   context.CancelFunc
	// sigs feeds RunSignalled as signal.Notify would (`agent signal`).
	sigs chan os.Signal
	// exited is closed when RunSignalled has returned runErr.
	exited          chan struct{}
	runErr          error
	stopped, judged bool
}

// scGatedRunner is the built-in synthetic runner, made to wait for a
// permit before each run when hold is set. It adds no behaviour of its
// own: the output is the synthetic service's, unless the permit is an
// error (`agent release A fail=...`), which the run then returns as a
// renderer failing would.
type scGatedRunner struct {
	inner   runner.Runner
	hold    bool
	permits chan error
}

func (g *scGatedRunner) Run(ctx context.Context, spec runner.Spec, in, out string) error {
	if g.hold {
		select {
		case err := <-g.permits:
			if err != nil {
				return err
			}
		case <-ctx.Done():
			return fmt.Errorf("held run stopped: %w", context.Cause(ctx))
		}
	}
	return g.inner.Run(ctx, spec, in, out)
}

// scWireFrame is one frame the relay passed: sent by the agent (sent) or
// delivered to it, on which session, and how `await` and `reached wire`
// match it (its type and words; the last word is its attempt).
type scWireFrame struct {
	sent    bool
	session int
	msg     any
	typ     string
	detail  []string
	at      time.Time // when the relay recorded it
	// d is a `backoff` or `upload_retry` pseudo-frame's wait; lasted is how
	// long the session a backoff follows lasted (both as the agent logged).
	d, lasted time.Duration
}

// scRelay is the recording WebSocket relay between one agent and a gateway.
type scRelay struct {
	r     *scRun
	agent string
	// fronts are the relay's listeners, one per gateway the agent may dial
	// (its server URL, then its failover URLs), each behind a TCP proxy
	// that can black-hole its connections.
	fronts []*scFront

	mu       sync.Mutex
	frames   []scWireFrame
	changed  chan struct{} // closed and replaced on every new frame
	sessions int
	live     []*scRelaySession
	offline  bool
	// cutAfterUpload arms a cut (and, with offlineAfterCut, the refusal
	// of reconnects) for when the agent's next upload has been stored.
	cutAfterUpload, offlineAfterCut bool
	held                            map[string]string // job name -> the latest attempt offered
	// stalled, while not nil, holds the agent's frames back from the
	// gateway (`agent stall`) until it is closed (`agent flush`).
	stalled chan struct{}
	// puts are scripted answers to the agent's next PUTs (`agent put`).
	puts []string
	// uploads names the attempt of each offered upload URL path.
	uploads map[string]string
}

// scFront is one of a relay's listeners: gw is the stack it relays to.
type scFront struct {
	gw    string
	srv   *httptest.Server
	proxy *tcpproxy.Proxy
}

// url is where the agent dials this front: through its proxy.
func (f *scFront) url() string { return "http://" + f.proxy.Addr() }

type scRelaySession struct{ agentConn, gatewayConn *websocket.Conn }

func newRelay(r *scRun, name string, gateways []string) (*scRelay, error) {
	rl := &scRelay{r: r, agent: name, changed: make(chan struct{}), held: map[string]string{}, uploads: map[string]string{}}
	for _, gw := range gateways {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) { rl.serve(gw, w, req) }))
		proxy, err := tcpproxy.New(srv.Listener.Addr().String())
		if err != nil {
			srv.Close()
			rl.close()
			return nil, err
		}
		rl.fronts = append(rl.fronts, &scFront{gw: gw, srv: srv, proxy: proxy})
	}
	return rl, nil
}

// close takes the relay's listeners down.
func (rl *scRelay) close() {
	for _, f := range rl.fronts {
		f.proxy.Close()
		f.srv.Close()
	}
}

// serve relays one agent session to stack gw: it dials the gateway with
// the agent's handshake header first, so that a refusal (401, 429, 503)
// reaches the agent as the gateway's own status. A stack that is not
// running is a 502, as from a reverse proxy before a dead gateway.
func (rl *scRelay) serve(gw string, w http.ResponseWriter, req *http.Request) {
	rl.mu.Lock()
	offline := rl.offline
	rl.mu.Unlock()
	wsURL, running := rl.r.gwURLs.Load(gw)
	if offline || !running {
		rl.add(scWireFrame{sent: true, session: rl.sessionNow(), typ: "dial_refused", detail: []string{gw, "-"}})
		if offline {
			http.Error(w, "network down (scenario relay offline)", http.StatusServiceUnavailable)
		} else {
			http.Error(w, "gateway "+gw+" is not running", http.StatusBadGateway)
		}
		return
	}
	dctx, cancel := context.WithTimeout(req.Context(), rl.r.timeout)
	defer cancel()
	gconn, resp, err := websocket.Dial(dctx, wsURL.(string), &websocket.DialOptions{
		HTTPHeader: http.Header{"Authorization": req.Header.Values("Authorization")}})
	if err != nil {
		status := http.StatusBadGateway
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			status = resp.StatusCode
			if ra := resp.Header.Get("Retry-After"); ra != "" {
				w.Header().Set("Retry-After", ra)
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		if resp != nil && resp.Body != nil {
			_, _ = io.Copy(w, io.LimitReader(resp.Body, 4096))
		}
		return
	}
	aconn, err := websocket.Accept(w, req, nil)
	if err != nil {
		gconn.CloseNow()
		return
	}
	// The relay enforces no limit of its own: each end enforces its own.
	aconn.SetReadLimit(-1)
	gconn.SetReadLimit(-1)
	s := &scRelaySession{agentConn: aconn, gatewayConn: gconn}
	rl.mu.Lock()
	rl.sessions++
	session := rl.sessions
	rl.live = append(rl.live, s)
	rl.addLocked(scWireFrame{sent: true, session: session, typ: "dial", detail: []string{gw, "-"}})
	rl.mu.Unlock()
	var wg sync.WaitGroup
	wg.Go(func() { rl.pump(s, session, true) })
	wg.Go(func() { rl.pump(s, session, false) })
	wg.Wait()
	rl.mu.Lock()
	rl.live = slices.DeleteFunc(rl.live, func(x *scRelaySession) bool { return x == s })
	rl.mu.Unlock()
}

// pump copies one direction. An agent frame is recorded when the relay
// reads it; a gateway frame once it has been written to the agent, so that
// "after the agent was told" means after delivery, and a frame telling the
// agent an attempt is gone only after drainAgent. When either end goes,
// its close status (or an abrupt cut) is passed to the other.
func (rl *scRelay) pump(s *scRelaySession, session int, fromAgent bool) {
	src, dst := s.gatewayConn, s.agentConn
	if fromAgent {
		src, dst = s.agentConn, s.gatewayConn
	}
	ctx := context.Background()
	var toGateway chan scHeldFrame
	var written chan struct{}
	if fromAgent {
		toGateway, written = make(chan scHeldFrame, 1024), make(chan struct{})
		go rl.forward(src, dst, toGateway, written)
	}
	for {
		typ, data, err := src.Read(ctx)
		if err != nil {
			if fromAgent {
				close(toGateway)
				<-written // held frames reach the gateway before the close
			}
			if st := websocket.CloseStatus(err); st != -1 {
				if fromAgent {
					rl.add(scWireFrame{sent: true, session: session, typ: "close", detail: []string{"code=" + strconv.Itoa(int(st)), "-"}})
				}
				_ = dst.Close(st, "")
			} else {
				dst.CloseNow()
			}
			src.CloseNow()
			return
		}
		// Described (an offer named) before the agent can answer it, so
		// the agent's frames about it carry its script name.
		f := rl.describe(session, fromAgent, data)
		if fromAgent {
			// Recorded as read; written on by forward, which holds it
			// while the relay is stalled, so that the agent's later
			// frames are still read and recorded meanwhile.
			rl.add(f)
			toGateway <- scHeldFrame{typ, data}
			continue
		}
		if err := dst.Write(ctx, typ, data); err != nil {
			src.CloseNow()
			dst.CloseNow()
			return
		}
		if !fromAgent {
			if id, _ := goneBy(f.msg); id != "" {
				rl.drainAgent(s)
			}
			rl.add(f)
		}
	}
}

// scHeldFrame is an agent frame on its way to the gateway.
type scHeldFrame struct {
	typ  websocket.MessageType
	data []byte
}

// forward writes the agent's frames to the gateway in order, each once the
// relay is not stalled (`agent stall`, `agent flush`); a failed write drops
// both ends and the rest. It closes written when frames is closed and
// done.
func (rl *scRelay) forward(src, dst *websocket.Conn, frames <-chan scHeldFrame, written chan<- struct{}) {
	defer close(written)
	failed := false
	for m := range frames {
		rl.awaitFlush()
		if failed {
			continue
		}
		if err := dst.Write(context.Background(), m.typ, m.data); err != nil {
			src.CloseNow()
			dst.CloseNow()
			failed = true
		}
	}
}

// drainAgent returns once the relay has read every frame the agent wrote
// before its WebSocket read what the relay delivered so far: it pings the
// agent and waits for the pong, which the agent's reader sends only after
// reading the frames before the ping, and which the relay's agent pump
// reads only after the agent's frames before it (recording them). A frame
// the agent had sent before it could read a "gone" frame (a re-sent
// commit right behind its lease renewal, on reconnect) is so recorded
// before the "gone" frame. A failed ping (the agent gone) waits no longer.
func (rl *scRelay) drainAgent(s *scRelaySession) {
	ctx, cancel := context.WithTimeout(context.Background(), rl.r.timeout)
	defer cancel()
	_ = s.agentConn.Ping(ctx)
}

func (rl *scRelay) describe(session int, sent bool, data []byte) scWireFrame {
	decode := protocol.DecodeGatewayFrame
	if sent {
		decode = protocol.DecodeAgentFrame
	}
	msg, err := decode(data)
	if err != nil {
		msg = err
	}
	f := scWireFrame{sent: sent, session: session, msg: msg}
	if o, ok := msg.(*protocol.LeaseOffer); ok {
		// The gateway may offer a job before the create step that made
		// it has read its id; the offer is named (and delivered) once
		// it has.
		rl.r.awaitName(o.JobID)
	}
	// Under rl.mu: the offers' names (held) are shared by the sessions.
	rl.mu.Lock()
	defer rl.mu.Unlock()
	if sent {
		f.typ, f.detail = rl.r.describeSent(msg)
	} else {
		f.typ, f.detail = rl.r.describe(rl.agent, rl.held, msg)
	}
	if o, ok := msg.(*protocol.LeaseOffer); ok {
		if u, err := url.Parse(o.Output.UploadURL); err == nil {
			rl.uploads[u.Path] = rl.r.name(o.AttemptID)
		}
	}
	return f
}

func (rl *scRelay) add(f scWireFrame) {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	rl.addLocked(f)
}

func (rl *scRelay) addLocked(f scWireFrame) {
	f.at = time.Now()
	rl.frames = append(rl.frames, f)
	close(rl.changed)
	rl.changed = make(chan struct{})
}

// cut drops every live session at once, without a close frame.
func (rl *scRelay) cut() int {
	rl.mu.Lock()
	live := slices.Clone(rl.live)
	rl.mu.Unlock()
	for _, s := range live {
		s.agentConn.CloseNow()
		s.gatewayConn.CloseNow()
	}
	return len(live)
}

// uploaded is called once the artifact store acknowledged one of the
// agent's uploads, before the agent hears the answer: an armed cut strikes
// between the upload and the commit.
func (rl *scRelay) uploaded(status int) {
	rl.mu.Lock()
	armed := rl.cutAfterUpload
	rl.cutAfterUpload = false
	if armed && rl.offlineAfterCut {
		rl.offline = true
	}
	rl.mu.Unlock()
	if armed {
		rl.awaitUploadingHeard()
		n := rl.cut()
		rl.r.tl.add(laneAgent, fmt.Sprintf("%s: network cut after its upload was stored, before it heard the answer (%d session(s) dropped)", rl.agent, n))
	}
}

// awaitUploadingHeard waits (at most the scenario's timeout) until the
// gateway has answered every progress frame of the live session and one
// of them was an uploading phase. The agent queues its uploading phase
// and starts the upload at once, so without this wait a fast upload could
// be stored, and the cut strike, while that phase was still on the wire;
// the attempt would then be lost in running, not in uploading, the phase
// the after-upload scenarios exist for.
func (rl *scRelay) awaitUploadingHeard() {
	deadline := time.NewTimer(rl.r.timeout)
	defer deadline.Stop()
	for {
		heard, changed := rl.uploadingHeard()
		if heard {
			return
		}
		select {
		case <-changed:
		case <-deadline.C:
			return
		}
	}
}

// uploadingHeard reports whether the latest session carried an uploading
// phase and every progress frame on it has its answer (progress_ok, or a
// lease_conflict naming the attempt), or else a channel closed when the
// next frame is recorded.
func (rl *scRelay) uploadingHeard() (bool, <-chan struct{}) {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	unanswered := map[string]int{}
	uploading := false
	for _, f := range rl.frames {
		if f.session != rl.sessions || len(f.detail) == 0 {
			continue
		}
		attempt := f.detail[len(f.detail)-1]
		switch {
		case f.sent && f.typ == protocol.TypeProgress:
			unanswered[attempt]++
			uploading = uploading || f.detail[0] == string(protocol.AttemptUploading)
		case !f.sent && (f.typ == protocol.TypeProgressOK || f.typ == protocol.TypeLeaseConflict):
			unanswered[attempt]--
		}
	}
	for _, n := range unanswered {
		if n > 0 {
			return false, rl.changed
		}
	}
	return uploading, rl.changed
}

// scUploadBody is an upload's answer; the agent closing it means it has
// heard the answer, which the wire records as an `upload` pseudo-frame.
type scUploadBody struct {
	io.ReadCloser
	once   sync.Once
	relay  *scRelay
	status int
}

func (b *scUploadBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(func() {
		b.relay.add(scWireFrame{sent: true, session: b.relay.sessionNow(), typ: "upload",
			detail: []string{"status=" + strconv.Itoa(b.status), "-"}})
	})
	return err
}

func (rl *scRelay) sessionNow() int {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	return rl.sessions
}

// find returns the nth recorded frame in that direction matching spec (a
// type and words, as `expect` matches) on session (0: any), counting only
// frames after the first of type since (when set), or a channel closed
// when the next frame is recorded.
func (rl *scRelay) find(sent bool, spec []string, session, n int, since string) (scWireFrame, bool, <-chan struct{}) {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	for _, f := range rl.frames {
		if since != "" {
			if f.typ == since {
				since = ""
			}
			continue
		}
		if f.sent == sent && (session == 0 || f.session == session) && matchSpec([][]string{spec}, f.typ, f.detail) == 0 {
			if n--; n <= 0 {
				return f, true, nil
			}
		}
	}
	return scWireFrame{}, false, rl.changed
}

// scAgentTransport is the agent's HTTP transport: the ordinary one, with
// the relay told when an upload was stored and when the agent has read the
// answer.
type scAgentTransport struct {
	base  http.RoundTripper
	relay *scRelay
}

func (t *scAgentTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPut {
		if resp, err, ok := t.relay.scriptedPut(req); ok {
			return resp, err
		}
	}
	resp, err := t.base.RoundTrip(req)
	if req.Method == http.MethodPut {
		t.relay.recordPut(req, resp, err)
	}
	if err == nil && req.Method == http.MethodPut && resp.StatusCode/100 == 2 {
		t.relay.uploaded(resp.StatusCode)
		resp.Body = &scUploadBody{ReadCloser: resp.Body, relay: t.relay, status: resp.StatusCode}
	}
	return resp, err
}

// cmdAgent drives a shipped agent running in this process:
//
//	agent start A [slots=N] [hold] [gateway=G] [failover=G2,...] [speed=N] [disk=low]
//	            [stale=N] [drain_timeout=D] [runner=command [limit_s=N]|runner=record]
//	                                            pair device A and run the agent (RunSignalled) through a
//	                                            recording relay; failover: further gateways, dialled in turn
//	                                            after a failed session; speed: its clock runs N times real
//	                                            time; disk=low: its work dir reports less free space than
//	                                            its minimum; stale: N attempt dirs a previous run left;
//	                                            runner=command: a command runner whose program runs 60 s
//	                                            unless stopped; runner=record: one that records its argv and
//	                                            environment and renders (scenario_agentrules.go)
//	agent release A [n=N] [fail=enospc|nospace|error]
//	                                            let N held runs go, or fail them as named
//	agent await A sent|got TYPE [WORDS] [n=N] [since=T] [session=S] [within=D]
//	                                            wait until the agent sent (got) N such frames
//	                                            (counted after its first frame of type T; on its
//	                                            S-th session only), in D at most
//	agent cut A [after-upload|blackhole] [offline]
//	                                            drop its connection now, or once its next upload is stored;
//	                                            blackhole: its connections carry nothing more, never closed;
//	                                            offline: refuse reconnects until `agent online A`
//	agent online A                              accept its reconnects again
//	agent drain A                               drain as a first SIGTERM does: no new work, running attempts finish
//	agent stop A                                stop at once as a second SIGTERM does: running attempts fail
//	                                            provider_offline, then Run returns
//
// and the verbs of scenario_agentrules.go (signal, exited, stall, flush,
// put, disk, clock, count, backoff, waits, workdir, recorded).
// Besides frames, the wire holds pseudo-frames an await can wait for:
// `sent upload` (the agent has read an upload's answer), `sent dial G`
// (a session relayed to gateway G), `sent dial_refused G` (a dial refused
// while the relay is offline or G is down), `sent close code=N` (the agent
// closed its session), `sent put status=S ATTEMPT` (an upload's answer, S
// a status or conn), and `sent backoff` and `sent upload_retry` (a wait the
// agent logged). At the end of the scenario every such agent is stopped
// and its wire is checked (checkWire).
// Example: agent start a1 slots=1 hold
// Example: agent start a1 slots=1 runner=command limit_s=1
// Example: agent await a1 sent progress running j1#2
// Example: agent await a1 got progress_ok j1#1 n=2
// Example: agent await a1 sent dial_refused n=2 since=upload
// Example: agent cut a1 after-upload offline
// Example: agent drain a1
func cmdAgent(r *scRun, st scStep) error {
	verb, name := arg(st, 0), arg(st, 1)
	if verb == "start" {
		return r.startRealAgent(name, st)
	}
	a := r.real[name]
	if a == nil {
		return fmt.Errorf("no shipped agent %s (want: agent start %s first)", name, name)
	}
	switch verb {
	case "release":
		return r.releaseRuns(a, st)
	case "await":
		return r.awaitWire(a, st)
	case "cut":
		words := st.args[2:]
		if slices.Contains(words, "after-upload") {
			a.relay.mu.Lock()
			a.relay.cutAfterUpload, a.relay.offlineAfterCut = true, slices.Contains(words, "offline")
			a.relay.mu.Unlock()
			r.tl.add(laneAgent, name+": network cut armed for after its next upload")
			return nil
		}
		a.relay.mu.Lock()
		a.relay.offline = slices.Contains(words, "offline")
		a.relay.mu.Unlock()
		if slices.Contains(words, "blackhole") {
			n := a.relay.blackHole()
			r.tl.add(laneAgent, fmt.Sprintf("%s: network black-holed (%d connection(s) silenced: no RST, no FIN)", name, n))
			return nil
		}
		n := a.relay.cut()
		r.tl.add(laneAgent, fmt.Sprintf("%s: network cut (%d session(s) dropped)", name, n))
		return nil
	case "online":
		a.relay.mu.Lock()
		a.relay.offline = false
		a.relay.mu.Unlock()
		r.tl.add(laneAgent, name+": network back")
		return nil
	case "drain":
		a.agent.Drain()
		r.tl.add(laneAgent, name+": draining (first SIGTERM): no new work, running attempts finish")
		return nil
	case "stop":
		return r.stopRealAgent(a)
	}
	if h := scAgentVerbs[verb]; h != nil {
		return h(r, a, st)
	}
	return fmt.Errorf("want: agent start|release|await|cut|online|drain|stop|%s AGENT ...",
		strings.Join(slices.Sorted(maps.Keys(scAgentVerbs)), "|"))
}

// releaseRuns lets n held runs go, or fail as a renderer does: fail=enospc
// with ENOSPC in its error (a write on a full disk), fail=nospace with
// FFmpeg's words for it in plain text, fail=error with neither.
func (r *scRun) releaseRuns(a *scRealAgent, st scStep) error {
	n, err := optInt(st, "n", 1)
	if err != nil {
		return err
	}
	var fail error
	switch f := st.opt("fail", ""); f {
	case "":
	case "enospc":
		fail = fmt.Errorf("write output: %w", &os.PathError{Op: "write", Path: "output.mp4", Err: syscall.ENOSPC})
	case "nospace":
		fail = errors.New("ffmpeg exited 1: av_interleaved_write_frame(): No space left on device")
	case "error":
		fail = errors.New("ffmpeg exited 1: Invalid data found when processing input")
	default:
		return fmt.Errorf("fail=%s: want enospc, nospace or error", f)
	}
	for range n {
		a.gate.permits <- fail
	}
	what := "released"
	if fail != nil {
		what = "failed: " + fail.Error()
	}
	r.tl.add(laneAgent, fmt.Sprintf("%s: %d held run(s) %s", a.name, n, what))
	return nil
}

func (r *scRun) startRealAgent(name string, st scStep) error {
	if name == "" || r.real[name] != nil || r.agents[name] != nil {
		return fmt.Errorf("agent start: want a new agent name, got %q", name)
	}
	slots, err := optInt(st, "slots", 1)
	if err != nil {
		return err
	}
	gateways := []string{st.opt("gateway", "gw1")}
	if f := st.opt("failover", ""); f != "" {
		gateways = append(gateways, strings.Split(f, ",")...)
	}
	if _, err := r.stack(gateways[0]); err != nil {
		return err
	}
	speed, err := optInt(st, "speed", 1)
	if err != nil || speed < 1 {
		return fmt.Errorf("speed=%s: want a whole number of 1 or more", st.opt("speed", ""))
	}
	drainTimeout, err := time.ParseDuration(st.opt("drain_timeout", agent.DefaultDrainTimeout.String()))
	if err != nil {
		return fmt.Errorf("drain_timeout: %w", err)
	}
	services := []string{scService}
	deviceID, token, err := r.pairDevice(name, services, slots)
	if err != nil {
		return err
	}
	workDir, err := os.MkdirTemp("", "rendermac-scenario-agent-")
	if err != nil {
		return err
	}
	a := &scRealAgent{name: name, deviceID: deviceID, token: token, workDir: workDir,
		clock: newAgentClock(int64(speed)), disk: &scDisk{},
		sigs: make(chan os.Signal, 4), exited: make(chan struct{})}
	if r.real == nil {
		r.real = map[string]*scRealAgent{}
	}
	r.real[name] = a
	if err := a.prepare(st); err != nil {
		return err
	}
	inner, kind, err := a.runner(st)
	if err != nil {
		return err
	}
	a.gate = &scGatedRunner{inner: inner, hold: slices.Contains(st.args[1:], "hold"), permits: make(chan error, 64)}
	if a.relay, err = newRelay(r, name, gateways); err != nil {
		return err
	}
	var failover []string
	for _, f := range a.relay.fronts[1:] {
		failover = append(failover, f.url())
	}
	// Every line is recorded for the secrets check (scenario_secrets.go)
	// and read for the waits it logs (scAgentLog).
	rec := scRecorder{r: r, who: "agent " + name, next: r.agentLogHandler()}
	seed := fnv.New64a()
	_, _ = seed.Write([]byte(name))
	base := http.DefaultTransport.(*http.Transport).Clone()
	a.cfg = agent.Config{ServerURL: a.relay.fronts[0].url(), FailoverURLs: failover, DeviceToken: token, Services: services,
		Slots: slots, WorkDir: workDir, Clock: a.clock, Rand: rand.New(rand.NewPCG(seed.Sum64(), 1)),
		Logger:      slog.New(&scAgentLog{inner: rec, relay: a.relay}).With("agent", name),
		HTTPClient:  &http.Client{Transport: &scAgentTransport{base: base, relay: a.relay}},
		Runners:     map[string]runner.Runner{scService: a.gate},
		BackoffBase: realAgentBackoffBase, BackoffMax: realAgentBackoffMax, ShutdownTimeout: realAgentShutdown,
		FreeBytes: a.disk.free}
	ag, err := agent.New(a.cfg)
	if err != nil {
		return err
	}
	a.agent = ag
	ctx, stop := context.WithCancel(context.WithoutCancel(r.ctx))
	a.stop = stop
	go func() {
		a.runErr = ag.RunSignalled(ctx, a.sigs, drainTimeout)
		close(a.exited)
	}()
	r.tl.add(laneAgent, fmt.Sprintf("%s: shipped agent started in process (slots=%d, runner %s%s) via a recording relay to %s",
		name, slots, kind, map[bool]string{true: ", held", false: ""}[a.gate.hold], strings.Join(gateways, ", then ")))
	return nil
}

// agentLogHandler is where a shipped agent's log goes besides the relay:
// EnvOptions.Log, or nowhere.
func (r *scRun) agentLogHandler() slog.Handler {
	if w := r.env.opts.Log; w != nil {
		return slog.NewTextHandler(w, nil)
	}
	return slog.DiscardHandler
}

// runner is the runner an `agent start` serves the scenario's service
// with: the built-in synthetic runner, or with runner=command the command
// runner (agent/runner/command.go) over a program that reports progress and
// then renders for a minute (far past any frame timeout) unless stopped,
// with a time limit of limit_s seconds (default 600), so a script can watch
// a stop or the time limit end it; runner=record is recordRunner's.
func (a *scRealAgent) runner(st scStep) (runner.Runner, string, error) {
	switch kind := st.opt("runner", "synthetic"); kind {
	case "synthetic":
		return runner.Synthetic{Clock: clock.Real{}}, "synthetic.mp4", nil
	case "command":
		limit, err := optInt(st, "limit_s", 600)
		if err != nil {
			return nil, "", err
		}
		c, err := runner.NewCommand(runner.CommandConfig{
			Argv:     []string{"sh", "-c", `echo "PROGRESS 0.5"; exec sleep 60`, "sh", runner.PlaceholderOutput},
			TimeoutS: limit,
		})
		if err != nil {
			return nil, "", err
		}
		return c, fmt.Sprintf("command (renders for 60s unless stopped, limit %ds)", limit), nil
	case "record":
		return a.recordRunner()
	default:
		return nil, "", fmt.Errorf("runner=%s: want synthetic, command or record", kind)
	}
}

// pairDevice creates a device row for an agent of the script, with the
// token its sessions authenticate with.
func (r *scRun) pairDevice(name string, services []string, slots int) (deviceID, token string, err error) {
	deviceID = fmt.Sprintf("00000000-0000-4000-8000-%012x", 0xd1+len(r.agents)+len(r.real))
	token = "device-token-" + name
	if err := r.admin.CreateDevice(r.ctx, deviceID, name, services, slots, protocol.HashCommitToken(token)); err != nil {
		return "", "", err
	}
	r.setName(deviceID, name)
	return deviceID, token, nil
}

// stopRealAgent shuts the agent down (running attempts are failed with
// provider_offline, bounded by its shutdown timeout) and waits for Run.
func (r *scRun) stopRealAgent(a *scRealAgent) error {
	if a.stopped {
		return nil
	}
	a.stopped = true
	if a.relay == nil { // its start failed before the relay existed
		_ = os.RemoveAll(a.workDir)
		return nil
	}
	// Frames held back reach the gateway before the shutdown's fails.
	a.relay.flush()
	var err error
	if a.stop != nil {
		a.stop()
		select {
		case <-a.exited:
			err = a.runErr
		case <-time.After(realAgentShutdown + r.timeout):
			err = errors.New("agent did not return from Run after its shutdown")
		}
	}
	a.relay.cut()
	a.relay.close()
	_ = os.RemoveAll(a.workDir)
	if a.record != "" {
		_ = os.RemoveAll(a.record)
	}
	r.tl.add(laneAgent, a.name+": shipped agent stopped")
	if err != nil {
		return fmt.Errorf("agent %s: %w", a.name, err)
	}
	return nil
}

// awaitWire waits, up to the frame timeout, for a frame on the agent's wire.
func (r *scRun) awaitWire(a *scRealAgent, st scStep) error {
	dir := arg(st, 2)
	if dir != "sent" && dir != "got" {
		return errors.New("want: agent await AGENT sent|got TYPE [WORDS]")
	}
	spec := wireSpec(st)
	n, err := optInt(st, "n", 1)
	if err != nil {
		return err
	}
	session, err := optInt(st, "session", 0)
	if err != nil {
		return err
	}
	start := time.Now()
	within, err := r.awaitBound(a, st)
	if err != nil {
		return err
	}
	deadline := time.NewTimer(r.timeout)
	defer deadline.Stop()
	for {
		f, ok, changed := a.relay.find(dir == "sent", spec, session, n, st.opt("since", ""))
		if ok {
			arrow := "<-"
			if f.sent {
				arrow = "->"
			}
			took := ""
			if within > 0 {
				if f.at.Sub(start) > within {
					return fmt.Errorf("agent %s %s %s only %v after the step began; the bound is %v", a.name, dir, strings.Join(spec, " "),
						f.at.Sub(start).Round(time.Millisecond), within)
				}
				took = fmt.Sprintf(", %v after the step began (bound %v)", max(0, f.at.Sub(start)).Round(time.Millisecond), within)
			}
			r.tl.add(laneAgent, fmt.Sprintf("%s %s %s %s (session %d%s)", a.name, arrow, f.typ, strings.Join(f.detail, " "), f.session, took))
			return nil
		}
		select {
		case <-changed:
		case <-deadline.C:
			return fmt.Errorf("agent %s never %s %s within %v; wire: %s", a.name, dir, strings.Join(spec, " "), r.timeout, a.relay.summary())
		case <-r.ctx.Done():
			return r.ctx.Err()
		}
	}
}

// summary renders the wire for an error message: its first frames, since
// an agent stuck in a loop can send thousands.
func (rl *scRelay) summary() string {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	var parts []string
	for i, f := range rl.frames {
		if i == wireSummaryFrames {
			parts = append(parts, fmt.Sprintf("... and %d more", len(rl.frames)-i))
			break
		}
		dir := "got"
		if f.sent {
			dir = "sent"
		}
		parts = append(parts, fmt.Sprintf("s%d %s %s %s", f.session, dir, f.typ, strings.Join(f.detail, " ")))
	}
	return strings.Join(parts, "; ")
}

// describeSent renders an agent frame as its type and words; the last word
// is the attempt it is about.
func (r *scRun) describeSent(msg any) (string, []string) {
	switch m := msg.(type) {
	case *protocol.Hello:
		return protocol.TypeHello, []string{"free=" + strconv.Itoa(m.SlotsFree), "-"}
	case *protocol.Slots:
		return protocol.TypeSlots, []string{"free=" + strconv.Itoa(m.SlotsFree), "-"}
	case *protocol.Progress:
		return protocol.TypeProgress, []string{string(m.Phase), r.name(m.AttemptID)}
	case *protocol.Commit:
		return protocol.TypeCommit, []string{r.name(m.AttemptID)}
	case *protocol.Fail:
		return protocol.TypeFail, []string{string(m.FailureCode), r.name(m.AttemptID)}
	case error:
		return "undecodable", []string{"-"}
	}
	return fmt.Sprintf("%T", msg), []string{"-"}
}

// wireSpec is the frame a wire step names: its words after the agent and
// the direction, as written (free=1 and requeued=true are words of the
// frame), without the step's own n=, session= and since= options.
func wireSpec(st scStep) []string {
	var out []string
	for _, w := range st.words[3:] {
		if !strings.HasPrefix(w, "n=") && !strings.HasPrefix(w, "session=") && !strings.HasPrefix(w, "since=") &&
			!strings.HasPrefix(w, "within=") {
			out = append(out, w)
		}
	}
	return out
}

// markWire is `reached wire A sent|got TYPE [WORDS] [session=N] [n=N]`.
func (r *scRun) markWire(st scStep) (bool, error) {
	a := r.real[arg(st, 1)]
	if a == nil {
		return false, fmt.Errorf("no shipped agent %s", arg(st, 1))
	}
	if dir := arg(st, 2); dir != "sent" && dir != "got" {
		return false, errors.New("want: reached wire AGENT sent|got TYPE [WORDS] [session=N]")
	}
	session, err := optInt(st, "session", 0)
	if err != nil {
		return false, err
	}
	n, err := optInt(st, "n", 1)
	if err != nil {
		return false, err
	}
	_, ok, _ := a.relay.find(arg(st, 2) == "sent", wireSpec(st), session, n, "")
	return ok, nil
}

// stopRealAgents stops every shipped agent and checks each one's wire.
func (r *scRun) stopRealAgents() error {
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(r.real)) {
		a := r.real[name]
		if a.stopped { // stopped by the script: its wire is still judged, once
			if a.judged {
				continue
			}
		} else if err := r.stopRealAgent(a); err != nil {
			errs = append(errs, err)
		}
		a.judged = true
		if err := checkWire(a.name, a.relay.snapshot()); err != nil {
			errs = append(errs, err)
		} else {
			r.tl.add(laneAgent, a.name+": wire check held: every frame echoed its offer's job, attempt, epoch and token; nothing after an attempt was gone")
		}
	}
	return errors.Join(errs...)
}

func (rl *scRelay) snapshot() []scWireFrame {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	return slices.Clone(rl.frames)
}

// checkWire holds the agent's side of SPEC section 5 against what it sent:
// every progress, commit and fail names an attempt this agent was offered
// and echoes that offer's job id and lease epoch; commit and fail carry
// that offer's commit token (never a previous attempt's); and once the
// gateway told the agent an attempt is gone (its commit or fail answered,
// or a lease_conflict other than job_cancelling or phase_regression,
// including the sweeper's attempt_lost), the agent sends nothing more for
// it. "Told" is when the relay delivered the frame and the agent's
// WebSocket has read it (drainAgent), so a frame the agent had already
// sent, but the relay had not yet read, does not count against it.
func checkWire(agentName string, frames []scWireFrame) error {
	// Offers count wherever they stand: the relay records a gateway frame
	// once delivered, and the agent may answer an offer before that.
	offers := map[string]*protocol.LeaseOffer{}
	for _, f := range frames {
		if o, ok := f.msg.(*protocol.LeaseOffer); ok && !f.sent {
			offers[o.AttemptID] = o
		}
	}
	gone := map[string]string{}
	var errs []string
	for _, f := range frames {
		if !f.sent {
			if id, why := goneBy(f.msg); id != "" {
				if _, seen := gone[id]; !seen {
					gone[id] = why
				}
			}
			continue
		}
		job, attempt, epoch, token, hasToken := frameIdentity(f.msg)
		if attempt == "" {
			continue
		}
		label := fmt.Sprintf("session %d: %s %s", f.session, f.typ, strings.Join(f.detail, " "))
		o := offers[attempt]
		switch {
		case o == nil:
			errs = append(errs, label+": names an attempt this agent was never offered")
			continue
		case gone[attempt] != "":
			errs = append(errs, fmt.Sprintf("%s: sent after the gateway said the attempt was gone (%s)", label, gone[attempt]))
		}
		if job != o.JobID {
			errs = append(errs, label+": job id is not the offer's")
		}
		if epoch != o.LeaseEpoch {
			errs = append(errs, fmt.Sprintf("%s: lease_epoch %d, the offer's is %d", label, epoch, o.LeaseEpoch))
		}
		if hasToken && token != o.CommitToken {
			errs = append(errs, label+": commit_token is not the one offered with this attempt")
		}
	}
	if len(errs) > wireErrorsShown {
		errs = append(errs[:wireErrorsShown], fmt.Sprintf("... and %d more", len(errs)-wireErrorsShown))
	}
	if len(errs) > 0 {
		return fmt.Errorf("agent %s broke the wire contract (SPEC section 5):\n  %s", agentName, strings.Join(errs, "\n  "))
	}
	return nil
}

// wireErrorsShown bounds the violations one report lists: an agent stuck
// in a loop can send thousands of frames in a scenario.
const wireErrorsShown = 5

// wireSummaryFrames bounds the frames an await's error lists.
const wireSummaryFrames = 40

// goneBy returns the attempt a gateway frame ends for the agent, and why.
func goneBy(msg any) (string, string) {
	switch m := msg.(type) {
	case *protocol.LeaseConflict:
		if m.Reason != protocol.ReasonJobCancelling && m.Reason != protocol.ReasonPhaseRegression {
			return m.AttemptID, "lease_conflict " + string(m.Reason)
		}
	case *protocol.CommitOK:
		return m.AttemptID, "commit_ok"
	case *protocol.CommitRejected:
		return m.AttemptID, "commit_rejected " + string(m.Code)
	case *protocol.FailOK:
		return m.AttemptID, "fail_ok"
	case *protocol.FailRejected:
		return m.AttemptID, "fail_rejected " + string(m.Code)
	}
	return "", ""
}

// frameIdentity is what an agent frame claims: job, attempt, epoch and,
// for commit and fail, the token.
func frameIdentity(msg any) (job, attempt string, epoch int, token string, hasToken bool) {
	switch m := msg.(type) {
	case *protocol.Progress:
		return m.JobID, m.AttemptID, m.LeaseEpoch, "", false
	case *protocol.Commit:
		return m.JobID, m.AttemptID, m.LeaseEpoch, m.CommitToken, true
	case *protocol.Fail:
		return m.JobID, m.AttemptID, m.LeaseEpoch, m.CommitToken, true
	}
	return "", "", 0, "", false
}
