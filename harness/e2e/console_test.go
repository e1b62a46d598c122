package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/agent/runner"
	"github.com/rendermac/rendermac/harness/deviceclient"
	"github.com/rendermac/rendermac/harness/evidence"
	"github.com/rendermac/rendermac/internal/provenance"
	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/api"
	"github.com/rendermac/rendermac/server/console"
	"github.com/rendermac/rendermac/server/controlplane"
	"github.com/rendermac/rendermac/server/webhook"
)

// consoleStack is a stack whose console lists two qualification cards, and
// an operator credential minted as `rendermac admin create-operator` does.
type consoleStack struct {
	*stack
	operator, operatorID string
	cards                []string
}

// newConsoleStack starts a stack with the console's cards directory
// holding a passing and a failing card, written by package evidence. The
// lease TTL is long enough that a browser on a loaded machine sees a lease
// before the sweeper would take it.
func newConsoleStack(t *testing.T, ttl time.Duration) *consoleStack {
	t.Helper()
	dir := t.TempDir()
	names := writeCards(t, dir)
	s := newStackWith(t, func(c *controlplane.Config) {
		c.Console = console.Config{CardsDir: dir, CardHTML: evidence.HTMLFromJSON, CardDiff: evidence.DiffJSON,
			PollInterval: 100 * time.Millisecond}
		if ttl > 0 {
			c.LeaseTTL, c.Heartbeat = ttl, ttl/4
		}
	})
	id, cred, err := console.CreateOperator(context.Background(), s.plane.Pool, "e2e operator")
	require.NoError(t, err)
	return &consoleStack{stack: s, operator: cred, operatorID: id, cards: names}
}

// writeCards writes two JSON cards of one commit, the second failing a
// scenario the first passed, and returns their file names.
func writeCards(t *testing.T, dir string) []string {
	t.Helper()
	card := func(date string, passed bool) evidence.Card {
		c := evidence.Card{Title: "Phase-fault qualification", Date: date, Passed: passed,
			Run: evidence.RunInfo{Build: provenance.Build{Commit: "0123456789ab", GoVersion: "go1.26.0", SchemaVersion: 5},
				PostgresVersion: "15", Command: "rendermac qualify --seeds 8", FirstSeed: 1},
			Campaigns: []evidence.Campaign{{Name: "model", Target: "model", Seeds: 8, Sequences: 8, Steps: 800, Passed: true}},
			Scenarios: []evidence.Scenario{{Name: "commit_after_cancel", Fault: "cancel", Phase: "running",
				Expected: "cancelled", Observed: "cancelled", Passed: true}},
		}
		if !passed {
			c.Scenarios[0].Observed, c.Scenarios[0].Passed = "succeeded", false
			c.Failures = []evidence.Failure{{Source: "commit_after_cancel", Detail: "a commit beat the cancel",
				Replay: "rendermac scenarios --run commit_after_cancel"}}
		}
		return c
	}
	var names []string
	for _, c := range []evidence.Card{card("2026-12-04", true), card("2026-12-05", false)} {
		var buf bytes.Buffer
		require.NoError(t, evidence.WriteJSON(&buf, c, evidence.WriteOptions{}))
		_, name, _, _ := evidence.FileNames(c)
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), buf.Bytes(), 0o644))
		names = append(names, name)
	}
	return names
}

// consoleGet fetches a console path with header set by auth; it returns
// the status and body.
func (s *consoleStack) consoleGet(t *testing.T, path string, auth func(*http.Request)) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, s.baseURL()+path, nil)
	require.NoError(t, err)
	if auth != nil {
		auth(req)
	}
	resp, err := s.client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

func bearerAuth(secret string) func(*http.Request) {
	return func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+secret) }
}

// TestConsoleAuthentication: the console opens to an operator credential
// (as a bearer secret, or through the login form's session cookie) and to
// nothing else: no credential is 401 (the login page), a buyer's API key
// and a device token are 403, an unknown or revoked credential and a
// tampered cookie are 401.
func TestConsoleAuthentication(t *testing.T) {
	s := newConsoleStack(t, 0)
	creds, _ := s.pair(runner.ServiceSynthetic)

	status, body := s.consoleGet(t, "/console/", nil)
	require.Equal(t, http.StatusUnauthorized, status)
	require.Contains(t, body, `name="credential"`, "a browser without a session gets the login form")
	status, body = s.consoleGet(t, "/console/jobs", func(r *http.Request) { r.Header.Set("Accept", "application/json") })
	require.Equal(t, http.StatusUnauthorized, status)
	require.Contains(t, body, `"code":"unauthorized"`)

	for name, secret := range map[string]string{"buyer API key": s.apiKey, "device token": creds.DeviceToken} {
		status, body = s.consoleGet(t, "/console/", bearerAuth(secret))
		require.Equal(t, http.StatusForbidden, status, "%s: %s", name, body)
	}
	status, _ = s.consoleGet(t, "/console/", bearerAuth("rmo_"+strings.Repeat("A", 43)))
	require.Equal(t, http.StatusUnauthorized, status, "an unknown operator credential")
	for _, path := range []string{"/console/", "/console/queue", "/console/jobs", "/console/cards"} {
		status, body = s.consoleGet(t, path, bearerAuth(s.operator))
		require.Equal(t, http.StatusOK, status, "%s: %s", path, body)
	}

	// The login form: a buyer's key is refused there too; the operator's
	// credential gets an HttpOnly, SameSite=Strict session cookie.
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	browser := &http.Client{Jar: jar, Transport: &http.Transport{}, Timeout: 15 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	t.Cleanup(browser.CloseIdleConnections)
	login := func(secret string) *http.Response {
		resp, err := browser.PostForm(s.baseURL()+"/console/login", url.Values{"credential": {secret}})
		require.NoError(t, err)
		_ = resp.Body.Close()
		return resp
	}
	require.Equal(t, http.StatusForbidden, login(s.apiKey).StatusCode)
	require.Equal(t, http.StatusUnauthorized, login("not a credential").StatusCode)
	resp := login(s.operator)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	var session *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == console.CookieName {
			session = c
		}
	}
	require.NotNil(t, session, "a session cookie")
	require.True(t, session.HttpOnly)
	require.Equal(t, http.SameSiteStrictMode, session.SameSite)
	require.NotContains(t, session.Value, s.operator, "the cookie is a session, not the credential")
	withCookie := func(c *http.Cookie) func(*http.Request) { return func(r *http.Request) { r.AddCookie(c) } }
	status, _ = s.consoleGet(t, "/console/jobs", withCookie(session))
	require.Equal(t, http.StatusOK, status)
	tampered := *session
	tampered.Value = tampered.Value[:len(tampered.Value)-2] + "AA"
	status, _ = s.consoleGet(t, "/console/jobs", withCookie(&tampered))
	require.Equal(t, http.StatusUnauthorized, status, "a tampered session cookie")

	// Revoking the operator ends its bearer access and its sessions.
	require.NoError(t, console.RevokeOperator(context.Background(), s.plane.Pool, s.operatorID))
	status, _ = s.consoleGet(t, "/console/", bearerAuth(s.operator))
	require.Equal(t, http.StatusUnauthorized, status)
	status, _ = s.consoleGet(t, "/console/", withCookie(session))
	require.Equal(t, http.StatusUnauthorized, status)
}

// runSecrets are every secret of a console run, in every form that could
// leak: plaintexts, their stored hashes, and the signing key's encodings.
type runSecrets map[string]string

func (rs runSecrets) add(name, plaintext string) {
	rs[name] = plaintext
	rs[name+" (hash)"] = api.HashSecret(plaintext)
}

// addStoredHashes adds every hash the database holds: API keys, device
// tokens, commit tokens (of attempts whose plaintext only an agent saw),
// pairing codes and operator credentials.
func (rs runSecrets) addStoredHashes(t *testing.T, s *stack) {
	t.Helper()
	rows, err := s.plane.Pool.Query(context.Background(), `
SELECT 'api key hash', key_hash FROM api_keys
UNION ALL SELECT 'device token hash', token_hash FROM devices WHERE token_hash IS NOT NULL
UNION ALL SELECT 'commit token hash', commit_token_hash FROM job_attempts
UNION ALL SELECT 'pairing code hash', code_hash FROM pairing_codes
UNION ALL SELECT 'operator credential hash', token_hash FROM operators`)
	require.NoError(t, err)
	defer rows.Close()
	n := 0
	for rows.Next() {
		var kind, hash string
		require.NoError(t, rows.Scan(&kind, &hash))
		rs[fmt.Sprintf("stored %s %d", kind, n)] = hash
		n++
	}
	require.NoError(t, rows.Err())
}

// requireNoSecret fails when page holds any secret.
func (rs runSecrets) requireNoSecret(t *testing.T, what, page string) {
	t.Helper()
	for name, secret := range rs {
		require.NotContains(t, page, secret, "%s renders the %s", what, name)
	}
}

// TestConsoleRendersNoSecret fills a stack with every kind of secret (an
// API key, pairing codes used and unused, device tokens, commit tokens of a
// device the test drives and of a real agent, the operator's credential,
// the signing key and a webhook secret derived from it), renders every
// console page, and finds none of them, nor any stored hash, in any page.
func TestConsoleRendersNoSecret(t *testing.T) {
	s := newConsoleStack(t, 0)
	ctx := context.Background()
	rs := runSecrets{}
	rs.add("buyer API key", s.apiKey)
	rs.add("operator credential", s.operator)
	key := s.cfg.SigningKey
	rs["signing key"], rs["signing key (hex)"] = string(key), hex.EncodeToString(key)
	rs["signing key (base64)"], rs["signing key (base64url)"] = base64.StdEncoding.EncodeToString(key), base64.RawURLEncoding.EncodeToString(key)
	rs["webhook secret"] = webhook.BuyerSecret(key, s.buyerID(t))
	unused, _, err := api.CreatePairingCode(ctx, s.plane.Pool, time.Time{}, 10*time.Minute)
	require.NoError(t, err)
	rs.add("unused pairing code", api.NormalizePairingCode(unused))
	rs["unused pairing code (as printed)"] = unused

	// A device the test drives: its token and its attempt's commit token.
	driven, _ := s.pair(runner.ServiceSynthetic)
	rs.add("driven device token", driven.DeviceToken)
	c, _, err := deviceclient.Dial(ctx, deviceclient.WSURL(s.baseURL(), "/v1/provider/ws"), driven.DeviceToken)
	require.NoError(t, err)
	defer c.Close()
	deviceclient.MustHello(t, c, []string{runner.ServiceSynthetic}, 1, 1)
	failed := s.createJob(runner.ServiceSynthetic, map[string]string{"seed": "fails"}, nil)
	offer := deviceclient.Expect[protocol.LeaseOffer](t, c)
	rs.add("driven commit token", offer.CommitToken)
	deviceclient.MustSend(t, c, deviceclient.Fail(offer, protocol.FailRunnerFailed))
	deviceclient.Expect[protocol.FailOK](t, c)
	c.Close()

	// A real agent runs a job to success: its commit token never leaves
	// it, so its stored hash is what is looked for.
	creds, _ := s.pair(runner.ServiceSynthetic)
	rs.add("agent device token", creds.DeviceToken)
	runAgent(t, "agent", creds, agentOptions{})
	ok := s.createJob(runner.ServiceSynthetic, map[string]string{"seed": "succeeds"}, nil)
	s.requireSucceededOutput(s.waitTerminal(ok.ID))
	s.waitTerminal(failed.ID)
	rs.addStoredHashes(t, s.stack)

	pages := []string{"/console/login", "/console/", "/console/queue", "/console/jobs", "/console/jobs?limit=1",
		"/console/jobs?status=succeeded", "/console/jobs?service=" + runner.ServiceSynthetic,
		"/console/jobs/" + ok.ID, "/console/jobs/" + failed.ID, "/console/cards",
		"/console/cards/" + s.cards[0], "/console/cards/" + s.cards[0] + "/html",
		"/console/cards/diff?a=" + s.cards[0] + "&b=" + s.cards[1]}
	for _, p := range pages {
		status, body := s.consoleGet(t, p, bearerAuth(s.operator))
		require.Equal(t, http.StatusOK, status, "%s: %s", p, body)
		rs.requireNoSecret(t, p, body)
	}
	// The job pages do show the four identities (never the token).
	_, body := s.consoleGet(t, "/console/jobs/"+failed.ID, bearerAuth(s.operator))
	require.Contains(t, body, offer.AttemptID)
	require.Contains(t, body, "presented", "the fail carried the commit token")
	require.Contains(t, body, "runner_failed")
	t.Logf("%d pages checked against %d secrets", len(pages), len(rs))
}

// buyerID is the stack's buyer, read back through its own key.
func (s *stack) buyerID(t *testing.T) string {
	t.Helper()
	var id string
	require.NoError(t, s.plane.Pool.QueryRow(context.Background(),
		`SELECT buyer_id::text FROM api_keys WHERE key_hash = $1`, api.HashSecret(s.apiKey)).Scan(&id))
	return id
}

// TestConsoleCardUpload: an operator uploads a qualification card through
// the cards page's form; it is stored in the cards directory, listed and
// diffable. A file that is not a card (422), a name that exists (409) and a
// cross-origin post (403) store nothing.
func TestConsoleCardUpload(t *testing.T) {
	s := newConsoleStack(t, 0)
	dir := t.TempDir()
	again := writeCards(t, dir) // the same two cards under the same names
	good, err := os.ReadFile(filepath.Join(dir, again[0]))
	require.NoError(t, err)
	renamed := "uploaded-" + again[0]

	upload := func(name string, body []byte, origin string) (int, string) {
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		fw, err := mw.CreateFormFile("card", name)
		require.NoError(t, err)
		_, err = fw.Write(body)
		require.NoError(t, err)
		require.NoError(t, mw.Close())
		req, err := http.NewRequest(http.MethodPost, s.baseURL()+"/console/cards", &buf)
		require.NoError(t, err)
		req.Header.Set("Content-Type", mw.FormDataContentType())
		req.Header.Set("Authorization", "Bearer "+s.operator)
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		client := &http.Client{Transport: &http.Transport{}, Timeout: 15 * time.Second,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		defer client.CloseIdleConnections()
		resp, err := client.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("Location")
	}
	status, _ := upload(renamed, []byte(`{"title":"not really a card"}`), "")
	require.Equal(t, http.StatusUnprocessableEntity, status)
	status, _ = upload(again[0], good, "")
	require.Equal(t, http.StatusConflict, status, "an existing card is never overwritten")
	status, _ = upload(renamed, good, "http://evil.example")
	require.Equal(t, http.StatusForbidden, status)
	_, body := s.consoleGet(t, "/console/cards", bearerAuth(s.operator))
	require.NotContains(t, body, renamed, "nothing was stored")

	status, where := upload(renamed, good, s.baseURL())
	require.Equal(t, http.StatusSeeOther, status)
	require.Equal(t, "/console/cards/"+renamed, where)
	_, body = s.consoleGet(t, "/console/cards", bearerAuth(s.operator))
	require.Contains(t, body, renamed)
	status, body = s.consoleGet(t, "/console/cards/diff?a="+renamed+"&b="+s.cards[0], bearerAuth(s.operator))
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, "no differences")
	status, body = s.consoleGet(t, "/console/cards/diff?a="+renamed+"&b="+s.cards[1], bearerAuth(s.operator))
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, "commit_after_cancel")
}
