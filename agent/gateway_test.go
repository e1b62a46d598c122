package agent

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/protocol"
)

// frameTimeout bounds every wait for a frame so a broken agent fails the
// test instead of hanging it.
const frameTimeout = 10 * time.Second

// fakeGateway speaks the gateway's side of SPEC section 5 under the test's
// control, plus the artifact endpoints: GET /artifacts/{key} serves inputs,
// PUT /artifacts/{key} records uploads.
type fakeGateway struct {
	t     *testing.T
	srv   *httptest.Server
	token string
	conns chan *gwConn
	// refuse, when non-zero, is the HTTP status the WebSocket endpoint answers.
	refuse    atomic.Int32
	putStatus atomic.Int32
	uploads   chan upload

	mu     sync.Mutex
	inputs map[string][]byte
	// secrets are every token handed out, to check none reaches the logs.
	secrets []string
}

type upload struct {
	key, query, contentType, authorization, ifNoneMatch string
	body                                                []byte
}

func newFakeGateway(t *testing.T) *fakeGateway {
	g := &fakeGateway{t: t, token: "dev-" + randHex(16), conns: make(chan *gwConn, 8),
		uploads: make(chan upload, 8), inputs: map[string][]byte{}}
	g.secrets = append(g.secrets, g.token)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/provider/ws", g.serveWS)
	mux.HandleFunc("GET /artifacts/{key...}", g.serveInput)
	mux.HandleFunc("PUT /artifacts/{key...}", g.serveUpload)
	g.srv = httptest.NewServer(mux)
	t.Cleanup(g.srv.Close)
	return g
}

func (g *fakeGateway) serveWS(w http.ResponseWriter, r *http.Request) {
	if st := g.refuse.Load(); st != 0 {
		writeAPIError(w, int(st), "unavailable", "refusing sessions")
		return
	}
	if r.Header.Get("Authorization") != "Bearer "+g.token {
		writeAPIError(w, http.StatusUnauthorized, "unauthorized", "unknown or revoked device")
		return
	}
	ws, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	c := &gwConn{ws: ws, frames: make(chan any, 64), slots: make(chan int, 64), closed: make(chan struct{})}
	g.conns <- c
	c.readLoop() // hold the handler until the connection ends
}

func (g *fakeGateway) serveInput(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	data, ok := g.inputs[r.PathValue("key")]
	g.mu.Unlock()
	if !ok {
		writeAPIError(w, http.StatusNotFound, "not_found", "no such input")
		return
	}
	_, _ = w.Write(data)
}

func (g *fakeGateway) serveUpload(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	switch st := g.putStatus.Load(); st {
	case 0:
	case http.StatusPreconditionFailed: // an S3 bucket's refusal of a second create-only PUT
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(int(st))
		fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>PreconditionFailed</Code>`+
			`<Message>At least one of the pre-conditions you specified did not hold.</Message><Condition>If-None-Match</Condition></Error>`)
		return
	default:
		writeAPIError(w, int(st), "store_error", "artifact store unavailable")
		return
	}
	g.uploads <- upload{key: r.PathValue("key"), query: r.URL.RawQuery, contentType: r.Header.Get("Content-Type"),
		authorization: r.Header.Get("Authorization"), ifNoneMatch: r.Header.Get("If-None-Match"), body: body}
	w.WriteHeader(http.StatusCreated)
}

func writeAPIError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"code":%q,"message":%q}`, code, msg)
}

// offer mints a lease offer as the control plane would: fresh ids, epoch 1,
// a fresh token, an attempt-scoped output key with a signed-looking URL. A
// non-nil input is served from the artifact endpoint.
func (g *fakeGateway) offer(service string, params map[string]string, input []byte) *protocol.LeaseOffer {
	jobID, attemptID := protocol.UUIDFrom(rand.Reader), protocol.UUIDFrom(rand.Reader)
	token, _, err := protocol.NewCommitToken(rand.Reader)
	require.NoError(g.t, err)
	key := protocol.OutputKey(jobID, attemptID)
	o := &protocol.LeaseOffer{Type: protocol.TypeLeaseOffer, JobID: jobID, AttemptID: attemptID, AttemptNumber: 1,
		LeaseEpoch: 1, CommitToken: token, LeaseExpiresAt: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC),
		Service: service, Params: params,
		Output: protocol.OutputGrant{Key: key, UploadURL: g.srv.URL + "/artifacts/" + key + "?sig=grant-" + randHex(8)}}
	if input != nil {
		g.mu.Lock()
		g.inputs[protocol.InputKey(jobID)] = input
		g.mu.Unlock()
		o.Input = protocol.InputRef{URL: g.srv.URL + "/artifacts/" + protocol.InputKey(jobID), Bytes: int64(len(input)), SHA256: sha256Hex(input)}
	}
	g.mu.Lock()
	g.secrets = append(g.secrets, token, o.Output.UploadURL[strings.Index(o.Output.UploadURL, "?"):])
	g.mu.Unlock()
	return o
}

func (g *fakeGateway) nextConn(t *testing.T) *gwConn {
	t.Helper()
	select {
	case c := <-g.conns:
		return c
	case <-time.After(frameTimeout):
		t.Fatal("agent did not connect")
		return nil
	}
}

func (g *fakeGateway) nextUpload(t *testing.T) upload {
	t.Helper()
	select {
	case u := <-g.uploads:
		return u
	case <-time.After(frameTimeout):
		t.Fatal("agent did not upload")
		return upload{}
	}
}

// gwConn is one agent session seen from the gateway. Agent frames are
// decoded strictly, as the real gateway does; slots frames are split off so
// tests can follow slot accounting and the lease protocol separately.
type gwConn struct {
	ws       *websocket.Conn
	frames   chan any
	slots    chan int
	closed   chan struct{}
	closeErr error
}

func (c *gwConn) readLoop() {
	defer close(c.closed)
	for {
		_, data, err := c.ws.Read(context.Background())
		if err != nil {
			c.closeErr = err
			return
		}
		msg, err := protocol.DecodeAgentFrame(data)
		if err != nil {
			c.frames <- fmt.Errorf("agent sent an undecodable frame %s: %w", data, err)
			continue
		}
		if s, ok := msg.(*protocol.Slots); ok {
			c.slots <- s.SlotsFree
			continue
		}
		c.frames <- msg
	}
}

func (c *gwConn) send(t *testing.T, msg any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), frameTimeout)
	defer cancel()
	require.NoError(t, c.ws.Write(ctx, websocket.MessageText, protocol.Encode(msg)))
}

// next returns the next non-slots frame, which must be a *T.
func next[T any](t *testing.T, c *gwConn) *T {
	t.Helper()
	select {
	case f := <-c.frames:
		if err, ok := f.(error); ok {
			t.Fatal(err)
		}
		m, ok := f.(*T)
		require.Truef(t, ok, "want %T, got %T %+v", m, f, f)
		return m
	case <-time.After(frameTimeout):
		var zero T
		t.Fatalf("no %T frame arrived", &zero)
		return nil
	}
}

func (c *gwConn) expectSlots(t *testing.T, want int) {
	t.Helper()
	select {
	case got := <-c.slots:
		require.Equal(t, want, got, "slots_free")
	case <-time.After(frameTimeout):
		t.Fatalf("no slots{%d} frame arrived", want)
	}
}

// handshake expects hello with the given free slots and answers welcome.
func (c *gwConn) handshake(t *testing.T, free int) *protocol.Hello {
	t.Helper()
	h := next[protocol.Hello](t, c)
	require.Equal(t, free, h.SlotsFree)
	c.send(t, &protocol.Welcome{Type: protocol.TypeWelcome, DeviceID: "dev-1", LeaseTTLMs: 30_000, HeartbeatMs: 3_600_000})
	return h
}

func (c *gwConn) expectProgress(t *testing.T, o *protocol.LeaseOffer, phase protocol.AttemptStatus) {
	t.Helper()
	p := next[protocol.Progress](t, c)
	require.Equal(t, protocol.Progress{Type: protocol.TypeProgress, JobID: o.JobID, AttemptID: o.AttemptID,
		LeaseEpoch: o.LeaseEpoch, Phase: phase}, *p)
}

// expectFail expects a fail for o with code and answers fail_ok.
func (c *gwConn) expectFail(t *testing.T, o *protocol.LeaseOffer, code protocol.FailureCode) *protocol.Fail {
	t.Helper()
	f := next[protocol.Fail](t, c)
	require.Equal(t, o.JobID, f.JobID)
	require.Equal(t, o.AttemptID, f.AttemptID)
	require.Equal(t, o.LeaseEpoch, f.LeaseEpoch)
	require.Equal(t, o.CommitToken, f.CommitToken)
	require.Equal(t, code, f.FailureCode, "fail message: %s", f.Message)
	c.send(t, &protocol.FailOK{Type: protocol.TypeFailOK, JobID: o.JobID, AttemptID: o.AttemptID})
	return f
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
