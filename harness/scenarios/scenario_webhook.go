package scenarios

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rendermac/rendermac/server/api"
	"github.com/rendermac/rendermac/server/metrics"
	"github.com/rendermac/rendermac/server/webhook"
)

// Webhooks as a receiver meets them (SPEC section 6): an endpoint of the
// buyer's that knows only what the contract tells it. It verifies every
// POST's signatures itself, never through package webhook's own code: the
// Standard Webhooks headers (webhook-id equal to the delivery id,
// webhook-timestamp within rcvTolerance of the receiver's clock, and
// webhook-signature "v1," + base64 HMAC-SHA256 of "id.timestamp.body"
// keyed with the base64-decoded secret) and the deprecated
// X-RenderMac-Signature (sha256= and the hex HMAC-SHA256 of the raw body,
// keyed with the legacy secret string as printed). It counts deliveries
// per job, refuses the first POSTs of each delivery with a 500 to force
// retries, and requires that every job's terminal event arrives at least
// once, with the same bytes and webhook-id on every retry. Any bad
// signature or stale timestamp fails the scenario.

// The receiver's view of the wire, written from the SPEC, not imported.
const (
	rcvSignatureHeader = "X-RenderMac-Signature"
	rcvDeliveryHeader  = "X-RenderMac-Delivery"
	rcvEventHeader     = "X-RenderMac-Event"
	rcvIDHeader        = "webhook-id"
	rcvTimestampHeader = "webhook-timestamp"
	rcvStdSigHeader    = "webhook-signature"
	rcvSecretPrefix    = "whsec_"
	// rcvTolerance is the replay window the Standard Webhooks libraries
	// use: a POST stamped further from the receiver's clock is refused.
	rcvTolerance = 5 * time.Minute
)

// scReceiver is the buyer's independent webhook endpoint.
type scReceiver struct {
	srv *httptest.Server
	// secret is the buyer's webhook secret, as the operator hands it over
	// (`rendermac admin webhook-secret` prints it); legacy is the key of
	// the deprecated header (`rendermac admin webhook-secret --legacy`).
	secret, legacy string
	// now is the receiver's clock: the scenario's, which the deliverer's
	// timestamps also come from.
	now  func() time.Time
	fail int // the first fail POSTs of each delivery are answered 500
	// script, when set, answers the receiver's POSTs in turn instead of
	// fail (then 204 once it is spent): a status (302 redirects
	// elsewhere), "timeout" (no answer until the deliverer gives up) or
	// "refused" (the pass finds no listener at all; see deliverWebhooks).
	script []string
	// connRefused counts the POSTs that found no listener ("refused").
	connRefused int

	mu  sync.Mutex
	bad []string // why a POST was not a valid delivery
	// per delivery id: its POSTs' bodies, and how many were refused
	bodies   map[string][]string
	refused  map[string]int
	accepted map[string]int
	jobOf    map[string]string // delivery id -> job id
	eventOf  map[string]string // delivery id -> event
}

// rcvDelivery is the body as the receiver reads it.
type rcvDelivery struct {
	DeliveryID json.Number     `json:"delivery_id"`
	Event      string          `json:"event"`
	JobID      string          `json:"job_id"`
	CreatedAt  string          `json:"created_at"`
	Data       json.RawMessage `json:"data"`
}

func (h *scReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	h.mu.Lock()
	defer h.mu.Unlock()
	if why := h.check(req, body, err); why != "" {
		h.bad = append(h.bad, why)
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	var d rcvDelivery
	_ = json.Unmarshal(body, &d) // check decoded it already
	id := d.DeliveryID.String()
	h.bodies[id] = append(h.bodies[id], string(body))
	h.jobOf[id], h.eventOf[id] = d.JobID, d.Event
	answer := ""
	switch {
	case len(h.script) > 0:
		answer, h.script = h.script[0], h.script[1:]
	case h.refused[id] < h.fail:
		answer = "500"
	}
	if answer == "" {
		h.accepted[id]++
		w.WriteHeader(http.StatusNoContent)
		return
	}
	h.refused[id]++
	if answer == "timeout" {
		h.mu.Unlock()
		<-req.Context().Done() // the deliverer's timeout ends the request
		h.mu.Lock()
		return
	}
	status, _ := strconv.Atoi(answer)
	if status/100 == 3 {
		w.Header().Set("Location", h.srv.URL+"/elsewhere")
	}
	w.WriteHeader(status)
}

// nextRefused consumes a "refused" at the head of the script.
func (h *scReceiver) nextRefused() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.script) > 0 && h.script[0] == "refused" {
		h.script = h.script[1:]
		return true
	}
	return false
}

// check returns why a POST is not a valid, correctly signed delivery.
func (h *scReceiver) check(req *http.Request, body []byte, readErr error) string {
	sig := req.Header.Get(rcvSignatureHeader)
	hexSig, ok := strings.CutPrefix(sig, "sha256=")
	got, err := hex.DecodeString(hexSig)
	m := hmac.New(sha256.New, []byte(h.legacy))
	m.Write(body)
	std := h.checkStandard(req.Header, body)
	var d rcvDelivery
	switch {
	case req.Method != http.MethodPost || readErr != nil:
		return fmt.Sprintf("%s with a body that could not be read (%v)", req.Method, readErr)
	case std != "":
		return std
	case !ok || err != nil:
		return fmt.Sprintf("signature header %q is not sha256=<hex>", sig)
	case !hmac.Equal(got, m.Sum(nil)):
		return fmt.Sprintf("bad signature %q over the %d-byte body", sig, len(body))
	case json.Unmarshal(body, &d) != nil || d.DeliveryID == "" || d.JobID == "":
		return fmt.Sprintf("body is not a delivery: %.200s", body)
	case req.Header.Get(rcvDeliveryHeader) != d.DeliveryID.String():
		return fmt.Sprintf("%s %q is not the body's delivery_id %s", rcvDeliveryHeader, req.Header.Get(rcvDeliveryHeader), d.DeliveryID)
	case req.Header.Get(rcvEventHeader) != d.Event:
		return fmt.Sprintf("%s %q is not the body's event %q", rcvEventHeader, req.Header.Get(rcvEventHeader), d.Event)
	case req.Header.Get(rcvIDHeader) != d.DeliveryID.String():
		return fmt.Sprintf("%s %q is not the body's delivery_id %s (it must stay one across retries)", rcvIDHeader,
			req.Header.Get(rcvIDHeader), d.DeliveryID)
	}
	return ""
}

// checkStandard is the Standard Webhooks check as its specification words
// it: the three headers present, the timestamp within rcvTolerance of now,
// and one of the space-separated signatures equal to "v1," + base64
// HMAC-SHA256(base64-decoded secret, id + "." + timestamp + "." + body).
func (h *scReceiver) checkStandard(hd http.Header, body []byte) string {
	id, ts, sigs := hd.Get(rcvIDHeader), hd.Get(rcvTimestampHeader), hd.Get(rcvStdSigHeader)
	if id == "" || ts == "" || sigs == "" {
		return fmt.Sprintf("missing a standard header: id %q, timestamp %q, signature %q", id, ts, sigs)
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Sprintf("%s %q is not Unix seconds", rcvTimestampHeader, ts)
	}
	if skew := h.now().Sub(time.Unix(sec, 0)); skew > rcvTolerance || skew < -rcvTolerance {
		return fmt.Sprintf("%s %s is %s from the receiver's clock: outside the %s replay window", rcvTimestampHeader, ts, skew, rcvTolerance)
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(h.secret, rcvSecretPrefix))
	if err != nil {
		return fmt.Sprintf("the secret is not whsec_<base64>: %v", err)
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id + "." + ts + "."))
	m.Write(body)
	want := "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
	for _, s := range strings.Fields(sigs) {
		if hmac.Equal([]byte(s), []byte(want)) {
			return ""
		}
	}
	return fmt.Sprintf("no valid %s in %q over id %s, timestamp %s and the %d-byte body", rcvStdSigHeader, sigs, id, ts, len(body))
}

// badDeliveries fails on anything the receiver refused as invalid.
func (h *scReceiver) badDeliveries() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.bad) > 0 {
		return fmt.Errorf("the receiver got %d invalid POST(s): %s", len(h.bad), strings.Join(h.bad, "; "))
	}
	return nil
}

// cmdReceiver starts the buyer's independent receiver (`receiver start`,
// refusing the first fail POSTs of every delivery with 500, or answering
// its POSTs as answers= lists: statuses, timeout, refused) and sets it as
// the buyer's webhook_url, or runs the outbox deliverer at the pinned
// clock (`receiver deliver`, each POST bounded by timeout=), moving the
// clock past each backoff, for passes passes.
// Example: receiver start fail=1
// Example: receiver start answers=302,404,500,refused,timeout
// Example: receiver deliver passes=4
func cmdReceiver(r *scRun, st scStep) error {
	s := r.surfaceState()
	switch arg(st, 0) {
	case "start":
		fail, err := optInt(st, "fail", 1)
		if err != nil {
			return err
		}
		var script []string
		if a := st.opt("answers", ""); a != "" {
			script, fail = strings.Split(a, ","), 0
			for _, w := range script {
				if n, err := strconv.Atoi(w); (err != nil || n/100 == 2 || n < 100 || n > 599) && w != "timeout" && w != "refused" {
					return fmt.Errorf("receiver start: answer %q: want a status that is not 2xx, timeout or refused", w)
				}
			}
		}
		if s.receiver != nil {
			return errors.New("receiver start: already started")
		}
		h := &scReceiver{secret: webhook.StandardSecret(scSigningKey, scBuyerID), legacy: webhook.BuyerSecret(scSigningKey, scBuyerID),
			now: r.clock.Now, fail: fail, script: script, bodies: map[string][]string{},
			refused: map[string]int{}, accepted: map[string]int{}, jobOf: map[string]string{}, eventOf: map[string]string{}}
		h.srv = httptest.NewServer(h)
		s.receiver = h
		if err := api.SetWebhookURL(r.ctx, r.observer, scBuyerID, h.srv.URL); err != nil {
			return err
		}
		if script != nil {
			r.tl.add(laneGateway, "buyer's receiver up; it answers "+strings.Join(script, ", ")+", then takes the delivery")
			return nil
		}
		r.tl.add(laneGateway, fmt.Sprintf("buyer's receiver up; it refuses the first %d POST(s) of each delivery", fail))
		return nil
	case "deliver":
		if s.receiver == nil {
			return errors.New("receiver deliver: no `receiver start` before it")
		}
		passes, err := optInt(st, "passes", 4)
		if err != nil {
			return err
		}
		timeout, err := time.ParseDuration(st.opt("timeout", webhook.DefaultTimeout.String()))
		if err != nil {
			return err
		}
		return r.deliverWebhooks(s.receiver, passes, timeout)
	}
	return errors.New("want: receiver start [fail=N | answers=A,...] | receiver deliver [passes=N] [timeout=D]")
}

// deliverWebhooks runs the production deliverer (its own client, which
// follows no redirect) for passes passes. A pass whose answer is "refused"
// finds the buyer's URL pointing at a port nothing listens on.
func (r *scRun) deliverWebhooks(h *scReceiver, passes int, timeout time.Duration) error {
	d, err := webhook.New(r.observer, scSigningKey, metrics.New(), slog.New(scRecorder{r: r, who: "deliverer"}),
		webhook.Config{Clock: r.clock, Timeout: timeout})
	if err != nil {
		return err
	}
	var total webhook.Result
	for pass := 0; pass < passes; pass++ {
		refused := h.nextRefused()
		if refused {
			if err := r.pointWebhooksNowhere(); err != nil {
				return err
			}
		}
		res, err := d.DeliverDue(r.ctx, r.clock.Now())
		if refused {
			if serr := api.SetWebhookURL(r.ctx, r.observer, scBuyerID, h.srv.URL); serr != nil {
				return serr
			}
			h.mu.Lock()
			h.connRefused += res.Failed
			h.mu.Unlock()
		}
		if err != nil {
			return fmt.Errorf("receiver deliver: pass %d: %w", pass, err)
		}
		total.Claimed += res.Claimed
		total.Delivered += res.Delivered
		total.Failed += res.Failed
		r.clock.Advance(webhook.DefaultBackoffMax)
	}
	var pending int
	if err := r.observer.QueryRow(r.ctx, `SELECT count(*) FROM webhook_outbox WHERE delivered_at IS NULL`).Scan(&pending); err != nil {
		return err
	}
	r.tl.add(laneGateway, fmt.Sprintf("deliverer: %d pass(es), %d POSTs, %d delivered, %d failed, %d outbox row(s) pending",
		passes, total.Claimed, total.Delivered, total.Failed, pending))
	r.count("webhook.retried", int64(total.Failed))
	if err := h.badDeliveries(); err != nil {
		return err
	}
	if pending > 0 {
		return fmt.Errorf("receiver deliver: %d outbox row(s) still undelivered after %d passes", pending, passes)
	}
	return nil
}

// pointWebhooksNowhere sets the buyer's webhook_url to a loopback port
// that was just closed: the next POST's connection is refused.
func (r *scRun) pointWebhooksNowhere() error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	url := "http://" + ln.Addr().String()
	if err := ln.Close(); err != nil {
		return err
	}
	return api.SetWebhookURL(r.ctx, r.observer, scBuyerID, url)
}

// cmdReceived checks what the receiver got for a job: its terminal event
// (the job's status) delivered at least once, after exactly `refused`
// refused POSTs, every POST of it with the same bytes, and no invalid POST
// at all; with attempts=N, the outbox row counts N attempts (those that
// reached the receiver and those that found no listener).
// Example: received j1 succeeded refused=1
// Example: received j1 cancelled refused=4 attempts=6
func cmdReceived(r *scRun, st scStep) error {
	h := r.surfaceState().receiver
	if h == nil {
		return errors.New("received: no `receiver start` before it")
	}
	id, err := r.jobID(arg(st, 0))
	if err != nil {
		return err
	}
	event := arg(st, 1)
	wantRefused, err := optInt(st, "refused", h.fail)
	if err != nil {
		return err
	}
	if err := h.badDeliveries(); err != nil {
		return err
	}
	var status string
	if err := r.observer.QueryRow(r.ctx, `SELECT status FROM jobs WHERE id = $1`, id).Scan(&status); err != nil {
		return err
	}
	h.mu.Lock()
	var ids []string
	for d, j := range h.jobOf {
		if j == id {
			ids = append(ids, d)
		}
	}
	slices.Sort(ids)
	var accepted, refused int
	var events []string
	identical := true
	for _, d := range ids {
		accepted += h.accepted[d]
		refused += h.refused[d]
		events = append(events, h.eventOf[d])
		for _, b := range h.bodies[d] {
			identical = identical && b == h.bodies[d][0]
		}
	}
	h.mu.Unlock()
	rendered := fmt.Sprintf("%s: %d delivery id(s) %s, events %v, %d accepted, %d refused", arg(st, 0),
		len(ids), strings.Join(ids, ","), events, accepted, refused)
	r.tl.add(laneGateway, "receiver: "+rendered)
	r.reply(fmt.Sprintf("received %s %s accepted=%d refused=%d", arg(st, 0), event, accepted, refused))
	switch {
	case status != event:
		return fmt.Errorf("received %s: the job is %s, not %s", arg(st, 0), status, event)
	case len(ids) != 1 || events[0] != event:
		return fmt.Errorf("received %s: want one delivery of event %s, got %s", arg(st, 0), event, rendered)
	case accepted < 1:
		return fmt.Errorf("received %s: the terminal event was never delivered (at least once): %s", arg(st, 0), rendered)
	case refused != wantRefused:
		return fmt.Errorf("received %s: want %d refused POST(s) retried, got %s", arg(st, 0), wantRefused, rendered)
	case !identical:
		return fmt.Errorf("received %s: a retry carried other bytes than the first POST", arg(st, 0))
	}
	if want := st.opt("attempts", ""); want != "" {
		var attempts int
		if err := r.observer.QueryRow(r.ctx, `SELECT attempts FROM webhook_outbox WHERE job_id = $1`, id).Scan(&attempts); err != nil {
			return err
		}
		h.mu.Lock()
		noListener := h.connRefused
		h.mu.Unlock()
		if strconv.Itoa(attempts) != want || attempts != accepted+refused+noListener {
			return fmt.Errorf("received %s: the outbox counts %d attempts, want %s (%d accepted, %d refused by the receiver, %d found no listener)",
				arg(st, 0), attempts, want, accepted, refused, noListener)
		}
	}
	r.count("webhook.received", int64(accepted))
	r.count("webhook.refused", int64(refused))
	return nil
}
