package console_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/internal/clock"
	"github.com/rendermac/rendermac/internal/pgprovider"
	"github.com/rendermac/rendermac/internal/pgtest"
	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/api"
	"github.com/rendermac/rendermac/server/console"
	"github.com/rendermac/rendermac/server/fencing"
	"github.com/rendermac/rendermac/server/grant"
	"github.com/rendermac/rendermac/server/store"
)

// TestMain stops the shared Postgres cluster, then checks for leaked
// goroutines.
func TestMain(m *testing.M) { os.Exit(pgtest.Run(m, nil)) }

const templateName = "rendermac_console"

var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// bundle is one test's database, a console over it on a pinned clock, and
// an operator credential.
type bundle struct {
	pool       *pgxpool.Pool
	stub       *clock.Stub
	console    *console.Console
	operator   string
	operatorID string
}

func setup(tb testing.TB, cfg console.Config) *bundle {
	tb.Helper()
	ctx := context.Background()
	pool, err := store.OpenPool(ctx, pgprovider.MustDatabase(tb, templateName, store.Migrate))
	require.NoError(tb, err)
	tb.Cleanup(pool.Close)
	signer, err := grant.NewSigner(bytes.Repeat([]byte{7}, grant.MinKeyBytes), "http://rendermac.test")
	require.NoError(tb, err)
	b := &bundle{pool: pool, stub: clock.NewStub(t0)}
	cfg.Clock = b.stub
	b.console = console.New(pool, signer, nil, cfg)
	tb.Cleanup(b.console.Shutdown)
	b.operatorID, b.operator, err = console.CreateOperator(ctx, pool, "test operator")
	require.NoError(tb, err)
	return b
}

// serve answers one request from peer with the console's handler.
func (b *bundle) serve(r *http.Request, peer string) *httptest.ResponseRecorder {
	r.RemoteAddr = peer
	w := httptest.NewRecorder()
	b.console.Handler().ServeHTTP(w, r)
	return w
}

func (b *bundle) get(path, peer string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodGet, path, nil)
	r.Header.Set("Authorization", "Bearer "+b.operator)
	return b.serve(r, peer)
}

const loopback, remote = "127.0.0.1:5000", "192.0.2.7:5000"

// TestLoopbackOnlyUnlessRemote: like /metrics without a token, the console
// answers loopback peers only (403 before any credential is looked at)
// unless Config.Remote; IPv6 loopback is loopback.
func TestLoopbackOnlyUnlessRemote(t *testing.T) {
	t.Parallel()
	b := setup(t, console.Config{})
	require.Equal(t, http.StatusOK, b.get("/console/", loopback).Code)
	require.Equal(t, http.StatusOK, b.get("/console/", "[::1]:5000").Code)
	w := b.get("/console/", remote)
	require.Equal(t, http.StatusForbidden, w.Code)
	require.Contains(t, w.Body.String(), "--console-remote")
	login := httptest.NewRequest(http.MethodPost, "/console/login", strings.NewReader(url.Values{"credential": {b.operator}}.Encode()))
	login.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	require.Equal(t, http.StatusForbidden, b.serve(login, remote).Code, "no session for a remote peer either")

	open := setup(t, console.Config{Remote: true})
	require.Equal(t, http.StatusOK, open.get("/console/", remote).Code)
	anon := httptest.NewRequest(http.MethodGet, "/console/", nil)
	require.Equal(t, http.StatusUnauthorized, open.serve(anon, remote).Code, "remote still needs a credential")
}

// TestSessionExpires: a session cookie is good until SessionTTL after the
// login, judged on the console's clock, and then the login page again.
func TestSessionExpires(t *testing.T) {
	t.Parallel()
	b := setup(t, console.Config{})
	login := httptest.NewRequest(http.MethodPost, "/console/login", strings.NewReader(url.Values{"credential": {b.operator}}.Encode()))
	login.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	w := b.serve(login, loopback)
	require.Equal(t, http.StatusSeeOther, w.Code)
	cookies := w.Result().Cookies()
	require.Len(t, cookies, 1)
	page := func() int {
		r := httptest.NewRequest(http.MethodGet, "/console/jobs", nil)
		r.AddCookie(cookies[0])
		return b.serve(r, loopback).Code
	}
	require.Equal(t, http.StatusOK, page())
	b.stub.Advance(console.SessionTTL - time.Second)
	require.Equal(t, http.StatusOK, page())
	b.stub.Advance(time.Second)
	require.Equal(t, http.StatusUnauthorized, page())
}

// TestJobPageIdentities: a job's page shows its attempt's id and epoch and
// says the device presented the commit token on fail, never the token.
func TestJobPageIdentities(t *testing.T) {
	t.Parallel()
	b := setup(t, console.Config{})
	ctx := context.Background()
	svc := fencing.NewService(b.pool, nil, protocol.RandomIDs{Jobs: rand.Reader, Attempts: rand.Reader, Tokens: rand.Reader}, fencing.Config{})
	buyer, device := protocol.UUIDFrom(rand.Reader), protocol.UUIDFrom(rand.Reader)
	require.NoError(t, svc.CreateBuyer(ctx, buyer, "pixel co", 1000))
	require.NoError(t, svc.CreateDevice(ctx, device, "mac-1", []string{"synthetic.mp4"}, 1, ""))
	job, err := svc.CreateJob(ctx, t0, protocol.CreateJobRequest{BuyerID: buyer, Service: "synthetic.mp4",
		Params: map[string]string{"seed": "1"}, MaxAttempts: 2, AdmissionWindow: time.Hour,
		Input: protocol.InputRef{URL: "https://in/x", Bytes: 10, SHA256: strings.Repeat("a1", 32)}})
	require.NoError(t, err)
	require.Equal(t, protocol.CodeCreated, job.Code, "%+v", job)
	offer, err := svc.Lease(ctx, t0, device)
	require.NoError(t, err)
	require.Equal(t, protocol.CodeLeaseOffer, offer.Code, "%+v", offer)
	r, err := svc.Fail(ctx, t0, device, protocol.Fail{JobID: offer.JobID, AttemptID: offer.AttemptID,
		LeaseEpoch: offer.LeaseEpoch, CommitToken: offer.CommitToken, FailureCode: protocol.FailRunnerFailed})
	require.NoError(t, err)
	require.Equal(t, protocol.CodeFailOK, r.Code, "%+v", r)

	w := b.get("/console/jobs/"+job.JobID, loopback)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	body := w.Body.String()
	require.Contains(t, body, offer.AttemptID)
	require.Contains(t, body, "presented")
	require.Contains(t, body, "issued")
	require.Contains(t, body, "runner_failed")
	require.NotContains(t, body, offer.CommitToken)
	require.NotContains(t, body, api.HashSecret(offer.CommitToken))

	require.Equal(t, http.StatusNotFound, b.get("/console/jobs/"+protocol.UUIDFrom(rand.Reader), loopback).Code)
	require.Equal(t, http.StatusBadRequest, b.get("/console/jobs?status=nope", loopback).Code)
	require.Equal(t, http.StatusBadRequest, b.get("/console/jobs?cursor=x", loopback).Code)
}
