package soak

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/rendermac/rendermac/server/webhook"
)

// Receiver is every buyer's webhook endpoint (/hook/{buyer id}). It
// records each delivery it acknowledged with 2xx, and refuses them all with
// 503 while failing is set (a webhook outage fault).
type Receiver struct {
	srv     *httptest.Server
	key     []byte
	failing atomic.Bool

	mu sync.Mutex
	// got maps an acknowledged delivery id to what it said.
	got map[int64]received
	// refused counts 503s; forged counts requests that were not
	// well-signed deliveries (each a violation).
	refused, forged int
	forgedWhy       []string
}

type received struct {
	buyer, job, event string
	times             int
}

// NewReceiver starts a receiver for webhooks signed with the server's key.
func NewReceiver(key []byte) *Receiver {
	r := &Receiver{key: key, got: map[int64]received{}}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	return r
}

// URL is the webhook URL of a buyer.
func (r *Receiver) URL(buyerID string) string { return r.srv.URL + "/hook/" + buyerID }

// Close stops the receiver.
func (r *Receiver) Close() { r.srv.Close() }

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	buyer, ok := strings.CutPrefix(req.URL.Path, "/hook/")
	var d webhook.Delivery
	switch {
	case err != nil:
		http.Error(w, "read", http.StatusBadRequest)
		return
	case !ok || !webhook.Verify(webhook.BuyerSecret(r.key, buyer), body, req.Header.Get(webhook.SignatureHeader)):
		r.forge("bad signature on " + req.URL.Path)
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	case json.Unmarshal(body, &d) != nil || d.DeliveryID == 0 || d.Event != req.Header.Get(webhook.EventHeader):
		r.forge("malformed delivery " + string(body))
		http.Error(w, "bad delivery", http.StatusBadRequest)
		return
	}
	if r.failing.Load() {
		r.mu.Lock()
		r.refused++
		r.mu.Unlock()
		http.Error(w, "outage", http.StatusServiceUnavailable)
		return
	}
	r.mu.Lock()
	g := r.got[d.DeliveryID]
	if g.times > 0 && (g.job != d.JobID || g.event != d.Event || g.buyer != buyer) {
		r.forgedWhy = append(r.forgedWhy, "delivery id reused for another event")
		r.forged++
	}
	r.got[d.DeliveryID] = received{buyer: buyer, job: d.JobID, event: d.Event, times: g.times + 1}
	r.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (r *Receiver) forge(why string) {
	r.mu.Lock()
	r.forged++
	if len(r.forgedWhy) < 5 {
		r.forgedWhy = append(r.forgedWhy, why)
	}
	r.mu.Unlock()
}

// SetFailing turns the outage (every delivery refused with 503) on or off.
func (r *Receiver) SetFailing(on bool) { r.failing.Store(on) }

// snapshot copies what was received.
// Acked is one delivery the receiver acknowledged: its id, buyer, job and
// event, and how often it came.
type Acked struct {
	ID                int64
	Buyer, Job, Event string
	Times             int
}

// Acknowledged lists the deliveries the receiver acknowledged with 2xx.
func (r *Receiver) Acknowledged() []Acked {
	got, _, _, _ := r.snapshot()
	out := make([]Acked, 0, len(got))
	for id, g := range got {
		out = append(out, Acked{ID: id, Buyer: g.buyer, Job: g.job, Event: g.event, Times: g.times})
	}
	return out
}

func (r *Receiver) snapshot() (got map[int64]received, refused, forged int, why []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	got = make(map[int64]received, len(r.got))
	for k, v := range r.got {
		got[k] = v
	}
	return got, r.refused, r.forged, append([]string(nil), r.forgedWhy...)
}
