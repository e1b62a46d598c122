package api_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/internal/clock"
	"github.com/rendermac/rendermac/internal/pgprovider"
	"github.com/rendermac/rendermac/internal/pgtest"
	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/protocol/buyer"
	"github.com/rendermac/rendermac/server/api"
	"github.com/rendermac/rendermac/server/artifact"
	"github.com/rendermac/rendermac/server/fencing"
	"github.com/rendermac/rendermac/server/grant"
	"github.com/rendermac/rendermac/server/metrics"
	"github.com/rendermac/rendermac/server/store"
)

// TestMain stops the shared Postgres cluster, then checks for leaked
// goroutines (servers, pools and connections every test must close).
// It prints how many exchanges the tests validated against the OpenAPI
// document (openapi_test.go).
func TestMain(m *testing.M) {
	os.Exit(pgtest.Run(m, func() { fmt.Println(openAPI().Summary()) }))
}

const (
	templateName = "rendermac_api"
	buyerID      = "00000000-0000-4000-8000-0000000000b1"
	otherBuyerID = "00000000-0000-4000-8000-0000000000b2"
	poorBuyerID  = "00000000-0000-4000-8000-0000000000b3"
	deviceID     = "00000000-0000-4000-8000-0000000000d1"
	missingID    = "00000000-0000-4000-8000-00000000dead"
	balance      = 1000
)

// t0 is the pinned clock's origin; tests move it explicitly.
var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

var signingKey = bytes.Repeat([]byte{7}, grant.MinKeyBytes)

// bundle is one test's world: a fresh database, the service and the API
// over it behind an httptest server, an FS store, a pinned clock, three
// buyers with API keys (the third with a balance below any price) and a
// device with two slots.
type bundle struct {
	srv                    *httptest.Server
	api                    *api.API
	pool                   *pgxpool.Pool
	svc                    *fencing.Service
	store                  *artifact.FS
	signer                 *grant.Signer
	stub                   *clock.Stub // the pinned clock
	key, otherKey, poorKey string
}

// setup builds the bundle; opts adjust the API's Config (limits, metrics).
func setup(t *testing.T, opts ...func(*api.Config)) *bundle {
	t.Helper()
	ctx := context.Background()
	url := pgprovider.MustDatabase(t, templateName, store.Migrate)
	pool, err := store.OpenPool(ctx, url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	fs, err := artifact.NewFS(t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { _ = fs.Close() })
	b := &bundle{pool: pool, store: fs}
	b.stub = clock.NewStub(t0)
	b.svc = fencing.NewService(pool, fs, protocol.RandomIDs{Jobs: rand.Reader, Attempts: rand.Reader, Tokens: rand.Reader}, fencing.Config{})
	b.signer, err = grant.NewSigner(signingKey, "http://rendermac.test")
	require.NoError(t, err)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg := api.Config{
		Clock: b.stub, MaxArtifactBytes: 1 << 20, MaxInputBytes: 1 << 16,
		Gateway: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) }),
	}
	for _, o := range opts {
		o(&cfg)
	}
	b.api = api.New(b.svc, pool, fs, b.signer, metrics.New(), log, cfg)
	b.srv = httptest.NewServer(checkOpenAPI(t, b.api.Handler()))
	t.Cleanup(b.srv.Close)
	b.key = b.buyer(t, buyerID, balance)
	b.otherKey = b.buyer(t, otherBuyerID, balance)
	b.poorKey = b.buyer(t, poorBuyerID, 1)
	require.NoError(t, b.svc.CreateDevice(ctx, deviceID, "mac", []string{"synthetic.mp4"}, 2, ""))
	return b
}

func (b *bundle) clock() time.Time { return b.stub.Now() }

func (b *bundle) advance(d time.Duration) { b.stub.Advance(d) }

func (b *bundle) buyer(t *testing.T, id string, cents int64) string {
	t.Helper()
	require.NoError(t, b.svc.CreateBuyer(context.Background(), id, "buyer "+id[len(id)-2:], cents))
	key, err := api.CreateAPIKey(context.Background(), b.pool, id)
	require.NoError(t, err)
	return key
}

// response is a decoded reply.
type response struct {
	Status int
	Header http.Header
	Body   []byte
}

func (r response) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(r.Body, &m), "body: %s", r.Body)
	return m
}

// do sends a request with an optional bearer key and headers given as
// name, value pairs.
func (b *bundle) do(t *testing.T, method, path, key string, body []byte, headers ...string) response {
	t.Helper()
	req, err := http.NewRequest(method, b.srv.URL+path, bytes.NewReader(body))
	require.NoError(t, err)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := b.srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return response{Status: resp.StatusCode, Header: resp.Header, Body: data}
}

// requireError checks status and the JSON error code (and field, if given).
func requireError(t *testing.T, r response, status int, code string, field ...string) {
	t.Helper()
	require.Equal(t, status, r.Status, "body: %s", r.Body)
	require.Equal(t, "application/json", r.Header.Get("Content-Type"))
	var e buyer.Error
	require.NoError(t, json.Unmarshal(r.Body, &e), "body: %s", r.Body)
	require.Equal(t, code, e.Code, "body: %s", r.Body)
	require.NotEmpty(t, e.Message)
	if len(field) > 0 {
		require.Equal(t, field[0], e.Field, "body: %s", r.Body)
	}
}

// createJob posts a job for key with body and returns the reply.
func (b *bundle) createJob(t *testing.T, key, body string, headers ...string) response {
	t.Helper()
	return b.do(t, http.MethodPost, "/v1/jobs", key, []byte(body), headers...)
}

// newJob creates a default job for the main buyer and returns its id.
func (b *bundle) newJob(t *testing.T) string {
	t.Helper()
	r := b.createJob(t, b.key, `{"service":"synthetic.mp4","params":{"seed":"a"}}`)
	require.Equal(t, http.StatusCreated, r.Status, "body: %s", r.Body)
	return r.json(t)["id"].(string)
}

// count returns the number of rows of a query like "SELECT count(*) ...".
func (b *bundle) count(t *testing.T, query string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, b.pool.QueryRow(context.Background(), query, args...).Scan(&n))
	return n
}
