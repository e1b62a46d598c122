package scenarios

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/rendermac/rendermac/client"
	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/protocol/buyer"
	"github.com/rendermac/rendermac/server/api"
	"github.com/rendermac/rendermac/server/grant"
	"github.com/rendermac/rendermac/server/metrics"
	"github.com/rendermac/rendermac/server/store"
	"github.com/rendermac/rendermac/server/webhook"
)

// The probes reach for a job the way nobody entitled to it may: another
// buyer, a revoked API key, a grant for another key, an expired grant. The
// fuzz campaigns never do (they drive the service layer as its rightful
// callers), so without these the gate would pass a server that drops a
// tenancy filter, a key's revocation or a grant's scope or expiry.

// scIntruderID is the second buyer of a run, created on first use.
const scIntruderID = "00000000-0000-4000-8000-00000000bad1"

// cmdIntruder sends one API request for a job as someone not entitled to
// it and checks the HTTP status: WHO is "other" (another buyer, with its
// own key) or "revoked" (a key of the job's own buyer, revoked). OP is
// get, events or cancel.
// Example: intruder other get j1 -> 404
func cmdIntruder(r *scRun, st scStep) error {
	who, op := arg(st, 0), arg(st, 1)
	id, err := r.jobID(arg(st, 2))
	if err != nil {
		return err
	}
	if len(st.arrow) != 1 {
		return fmt.Errorf("want: intruder other|revoked get|events|cancel|list|cursor JOB -> STATUS")
	}
	want, err := strconv.Atoi(st.arrow[0])
	if err != nil {
		return fmt.Errorf("intruder: status %q: %w", st.arrow[0], err)
	}
	key, err := r.intruderKey(who)
	if err != nil {
		return err
	}
	gw, err := r.stack(st.opt("via", "gw1"))
	if err != nil {
		return err
	}
	b := r.buyer(gw.baseURL(), key)
	method, path := http.MethodGet, "/v1/jobs/"+id // for the timeline
	status := http.StatusOK
	var page buyer.JobsPage
	switch op {
	case "get":
		_, err = b.Get(r.ctx, id)
	case "events":
		path += "/events"
		_, err = b.EventsPage(r.ctx, id, 0, "")
	case "cancel":
		method, path = http.MethodPost, path+"/cancel"
		var c client.Cancellation
		c, err = b.Cancel(r.ctx, id)
		status = c.Status
	case "list": // the intruder's own listing must not show JOB
		path = "/v1/jobs"
		page, err = b.ListPage(r.ctx, client.ListOptions{})
	case "cursor": // the owner's next-page cursor, replayed by the intruder
		owner, oerr := r.buyer(gw.baseURL(), r.apiKey).ListPage(r.ctx, client.ListOptions{Limit: 1})
		if oerr != nil {
			return fmt.Errorf("intruder cursor: the owner's first page of one job: %w", oerr)
		}
		if owner.NextCursor == "" {
			return fmt.Errorf("intruder cursor: the owner's first page of one job gave no next_cursor (the scenario needs two jobs): %v", owner)
		}
		path = "/v1/jobs?limit=1&cursor=" + url.QueryEscape(owner.NextCursor)
		page, err = b.ListPage(r.ctx, client.ListOptions{Limit: 1, Cursor: owner.NextCursor})
	default:
		return fmt.Errorf("intruder: unknown op %q (want get, events, cancel, list or cursor)", op)
	}
	status, code, err := replyOf(status, err)
	if err != nil {
		return err
	}
	r.tl.add(laneGateway, fmt.Sprintf("%s key -> %s %s: %d %s", who, method, strings.Replace(path, id, r.name(id), 1), status, code))
	r.reply(fmt.Sprintf("intruder %s %s -> %d", who, op, status))
	if status != want {
		return fmt.Errorf("intruder %s %s %s: want HTTP %d, got %d %s", who, op, r.name(id), want, status, code)
	}
	for _, j := range page.Jobs {
		if j.ID == id {
			return fmt.Errorf("intruder %s %s: another buyer's job %s is listed: %v", who, op, r.name(id), page)
		}
	}
	if op != "list" {
		r.count("refused", 1)
	}
	return nil
}

// intruderKey returns (creating once) the API key of who.
func (r *scRun) intruderKey(who string) (string, error) {
	r.mu.Lock()
	key := r.intruderKeys[who]
	r.mu.Unlock()
	if key != "" {
		return key, nil
	}
	var err error
	switch who {
	case "other":
		if err := r.admin.CreateBuyer(r.ctx, scIntruderID, "intruding buyer", scBuyerBalance); err != nil {
			return "", err
		}
		key, err = api.CreateAPIKey(r.ctx, r.observer, scIntruderID)
	case "revoked":
		if key, err = api.CreateAPIKey(r.ctx, r.observer, scBuyerID); err == nil {
			_, err = r.observer.Exec(r.ctx, `UPDATE api_keys SET revoked_at = now() WHERE key_hash = $1`, api.HashSecret(key))
		}
	default:
		return "", fmt.Errorf("intruder: unknown who %q (want other or revoked)", who)
	}
	if err != nil {
		return "", fmt.Errorf("intruder %s key: %w", who, err)
	}
	r.mu.Lock()
	r.intruderKeys[who] = key
	r.mu.Unlock()
	return key, nil
}

// cmdGrants checks the artifact endpoint's grants on a job's input: a
// fresh grant opens it (200), the same grant presented for another key is
// refused (403 grant_invalid), and a grant past its expiry is refused
// (403 grant_expired).
// Example: grants j1
func cmdGrants(r *scRun, st scStep) error {
	id, gw, err := r.jobVia(st, 0)
	if err != nil {
		return err
	}
	signer, err := grant.NewSigner(scSigningKey, gw.baseURL())
	if err != nil {
		return err
	}
	now := r.clock.Now()
	input := protocol.InputKey(id)
	fresh := signer.URL(grant.Get, input, now, time.Minute)
	u, err := url.Parse(fresh)
	if err != nil {
		return err
	}
	other := *u
	other.Path = grant.PathPrefix + protocol.InputKey("00000000-0000-4000-8000-00000000feed")
	checks := []struct {
		what, url string
		want      int
	}{
		{"a fresh grant", fresh, http.StatusOK},
		{"a grant for another key", other.String(), http.StatusForbidden},
		{"an expired grant", signer.URL(grant.Get, input, now.Add(-2*time.Minute), time.Minute), http.StatusForbidden},
	}
	for _, c := range checks {
		req, err := http.NewRequestWithContext(r.ctx, http.MethodGet, c.url, nil)
		if err != nil {
			return err
		}
		resp, err := r.httpc.Do(req)
		if err != nil {
			return fmt.Errorf("grants: %s: %w", c.what, err)
		}
		_ = resp.Body.Close()
		r.tl.add(laneGateway, fmt.Sprintf("GET %s's input with %s: %d", r.name(id), c.what, resp.StatusCode))
		if resp.StatusCode != c.want {
			return fmt.Errorf("grants: %s: want HTTP %d, got %d", c.what, c.want, resp.StatusCode)
		}
		if c.want == http.StatusForbidden {
			r.count("refused", 1)
		}
	}
	r.reply("grants -> scoped")
	return nil
}

// cmdConstraint writes, in a transaction it always rolls back, what the
// schema must refuse whatever the code above it does, and checks that it
// is refused by the named constraint. one_live: a second live attempt for
// a job that has one (invariant 1, job_attempts_one_live_idx).
// Example: constraint one_live j1
func cmdConstraint(r *scRun, st scStep) error {
	if probe, ok := schemaProbes[arg(st, 0)]; ok { // scenario_core.go
		return probe(r, st)
	}
	if arg(st, 0) != "one_live" {
		return fmt.Errorf("constraint: unknown check %q (want one_live, transitions, inserts or fence_one)", arg(st, 0))
	}
	id, err := r.jobID(arg(st, 1))
	if err != nil {
		return err
	}
	tx, err := r.observer.Begin(r.ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(r.ctx) }()
	tag, err := tx.Exec(r.ctx, `
INSERT INTO job_attempts (id, job_id, attempt_number, device_id, status, lease_epoch, commit_token_hash,
                          lease_expires_at, created_at)
SELECT gen_random_uuid(), job_id, attempt_number + 100, device_id, 'leased', 1, repeat('a', 64), lease_expires_at, created_at
FROM job_attempts WHERE job_id = $1 AND status IN `+store.SQLLiveStatuses, id)
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == "job_attempts_one_live_idx":
		r.tl.add(laneDatabase, fmt.Sprintf("second live attempt for %s: refused by %s", r.name(id), pgErr.ConstraintName))
		r.count("unique_violation", 1)
		return nil
	case err != nil:
		return fmt.Errorf("constraint one_live %s: refused, but not by job_attempts_one_live_idx: %w", r.name(id), err)
	case tag.RowsAffected() == 0:
		return fmt.Errorf("constraint one_live %s: the job has no live attempt to double", r.name(id))
	}
	return fmt.Errorf("constraint one_live %s: the database accepted a second live attempt", r.name(id))
}

// cmdWebhookEndpoint starts the buyer's webhook receiver, which refuses
// the first fail POSTs (HTTP 500) and takes the rest, and sets it as the
// buyer's webhook_url. It must come before the job ends: a job's terminal
// webhook is written for the URL its buyer has then (none: settled at once
// as 'no webhook url').
// Example: webhook-endpoint fail=1
func cmdWebhookEndpoint(r *scRun, st scStep) error {
	fail, err := optInt(st, "fail", 1)
	if err != nil {
		return err
	}
	if r.hook != nil {
		return errors.New("webhook-endpoint: already started")
	}
	h := &scWebhookEndpoint{fail: fail}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if h.posts.Add(1) <= int64(h.fail) {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	r.hook = h
	if err := api.SetWebhookURL(r.ctx, r.observer, scBuyerID, h.srv.URL); err != nil {
		return err
	}
	r.reply(fmt.Sprintf("webhook-endpoint -> refuses the first %d POSTs", fail))
	return nil
}

// scWebhookEndpoint is cmdWebhookEndpoint's receiver.
type scWebhookEndpoint struct {
	srv   *httptest.Server
	fail  int
	posts atomic.Int64
}

// cmdWebhooks delivers the outbox to the webhook-endpoint receiver, moving
// the pinned clock past each backoff, and checks that every refused
// delivery was retried until the receiver took it: fail failures (the
// endpoint's) and then want deliveries, no more and no fewer.
// Example: webhooks want=1
func cmdWebhooks(r *scRun, st scStep) error {
	want, err := optInt(st, "want", 1)
	if err != nil {
		return err
	}
	h := r.hook
	if h == nil {
		return errors.New("webhooks: no webhook-endpoint step before it")
	}
	d, err := webhook.New(r.observer, scSigningKey, metrics.New(), slog.New(slog.DiscardHandler),
		webhook.Config{Clock: r.clock, Client: h.srv.Client()})
	if err != nil {
		return err
	}
	var failed, delivered int
	for pass := 0; pass <= h.fail+1; pass++ {
		res, err := d.DeliverDue(r.ctx, r.clock.Now())
		if err != nil {
			return fmt.Errorf("webhooks: pass %d: %w", pass, err)
		}
		failed, delivered = failed+res.Failed, delivered+res.Delivered
		r.clock.Advance(webhook.DefaultBackoffMax)
	}
	r.tl.add(laneGateway, fmt.Sprintf("webhooks: %d POSTs, %d refused and retried, %d delivered", h.posts.Load(), failed, delivered))
	if failed != h.fail || delivered != want {
		return fmt.Errorf("webhooks: want %d failed then %d delivered, got %d failed and %d delivered", h.fail, want, failed, delivered)
	}
	r.count("webhook_retried", int64(failed))
	r.reply(fmt.Sprintf("webhooks -> %d retried, %d delivered", failed, delivered))
	return nil
}
