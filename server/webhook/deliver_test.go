package webhook_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/internal/clock"
	"github.com/rendermac/rendermac/server/webhook"
)

func TestDeliveryIsSignedForTheBuyer(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t)
	b := setup(t, rc)
	jobID := b.cancelledJob(t, buyerID, t0)
	d := b.deliverer(t, rc, webhook.Config{})

	res, err := d.DeliverDue(context.Background(), t0)
	require.NoError(t, err)
	require.Equal(t, webhook.Result{Claimed: 1, Delivered: 1}, res)
	got := rc.deliveries()
	require.Len(t, got, 1)
	h := got[0].Header
	require.True(t, webhook.Verify(webhook.BuyerSecret(signingKey, buyerID), got[0].Body, h.Get(webhook.SignatureHeader)),
		"signature %q must verify under the buyer's derived secret", h.Get(webhook.SignatureHeader))
	require.False(t, webhook.Verify(webhook.BuyerSecret(signingKey, quietBuyerID), got[0].Body, h.Get(webhook.SignatureHeader)),
		"another buyer's secret must not verify")
	require.False(t, webhook.Verify(webhook.BuyerSecret(signingKey, buyerID), append(got[0].Body, ' '), h.Get(webhook.SignatureHeader)),
		"a changed body must not verify")
	require.Equal(t, "cancelled", h.Get(webhook.EventHeader))
	require.Equal(t, "application/json", h.Get("Content-Type"))

	var body webhook.Delivery
	require.NoError(t, json.Unmarshal(got[0].Body, &body))
	require.Equal(t, jobID, body.JobID)
	require.Equal(t, "cancelled", body.Event)
	require.Equal(t, strconv.FormatInt(body.DeliveryID, 10), h.Get(webhook.DeliveryHeader))
	var data map[string]any
	require.NoError(t, json.Unmarshal(body.Data, &data))
	require.Equal(t, map[string]any{"job_id": jobID, "status": "cancelled", "at": "2030-01-02T03:04:05Z"}, data)

	o := b.outbox(t, jobID)
	require.Equal(t, 1, o.Attempts)
	require.NotNil(t, o.Delivered)
	require.Equal(t, t0, o.Delivered.UTC())
	require.Nil(t, o.LastError)

	// Delivered rows are never sent again.
	res, err = d.DeliverDue(context.Background(), t0.Add(time.Hour))
	require.NoError(t, err)
	require.Zero(t, res)
	require.Len(t, rc.deliveries(), 1)
}

func TestRetryAfterServerErrorWithBackoff(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t, http.StatusInternalServerError, http.StatusBadGateway)
	b := setup(t, rc)
	jobID := b.cancelledJob(t, buyerID, t0)
	d := b.deliverer(t, rc, webhook.Config{})
	ctx := context.Background()

	res, err := d.DeliverDue(ctx, t0)
	require.NoError(t, err)
	require.Equal(t, webhook.Result{Claimed: 1, Failed: 1}, res)
	o := b.outbox(t, jobID)
	require.Equal(t, 1, o.Attempts)
	require.Nil(t, o.Delivered)
	require.Equal(t, "http 500", *o.LastError)
	require.Equal(t, t0.Add(base), o.NextAttempt, "first retry after the base backoff")

	// Not due before the backoff has passed.
	res, err = d.DeliverDue(ctx, t0.Add(base-time.Microsecond))
	require.NoError(t, err)
	require.Zero(t, res.Claimed)

	t1 := t0.Add(base)
	res, err = d.DeliverDue(ctx, t1)
	require.NoError(t, err)
	require.Equal(t, webhook.Result{Claimed: 1, Failed: 1}, res)
	o = b.outbox(t, jobID)
	require.Equal(t, 2, o.Attempts)
	require.Equal(t, "http 502", *o.LastError)
	require.Equal(t, t1.Add(2*base), o.NextAttempt, "the backoff doubles")

	res, err = d.DeliverDue(ctx, t1.Add(2*base))
	require.NoError(t, err)
	require.Equal(t, webhook.Result{Claimed: 1, Delivered: 1}, res)
	o = b.outbox(t, jobID)
	require.Equal(t, 3, o.Attempts)
	require.NotNil(t, o.Delivered)
	require.Nil(t, o.LastError)

	// Every attempt carried the same body and signature.
	got := rc.deliveries()
	require.Len(t, got, 3)
	for _, g := range got[1:] {
		require.Equal(t, got[0].Body, g.Body)
		require.Equal(t, got[0].Header.Get(webhook.SignatureHeader), g.Header.Get(webhook.SignatureHeader))
	}
}

// TestAtLeastOnceAfterCrashMidDelivery: a deliverer that claimed a row and
// died before recording anything leaves it to be delivered once the claim
// lease runs out, by whichever deliverer polls next.
func TestAtLeastOnceAfterCrashMidDelivery(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t)
	b := setup(t, rc)
	jobID := b.cancelledJob(t, buyerID, t0)
	const claimTTL = time.Minute
	// The crashed deliverer's claim, exactly as sqlClaim leaves it.
	_, err := b.pool.Exec(context.Background(),
		`UPDATE webhook_outbox SET attempts = attempts + 1, next_attempt_at = $2 WHERE job_id = $1`, jobID, t0.Add(claimTTL))
	require.NoError(t, err)

	d := b.deliverer(t, rc, webhook.Config{ClaimTTL: claimTTL})
	res, err := d.DeliverDue(context.Background(), t0.Add(claimTTL-time.Microsecond))
	require.NoError(t, err)
	require.Zero(t, res.Claimed, "a held claim is not taken over early")
	res, err = d.DeliverDue(context.Background(), t0.Add(claimTTL))
	require.NoError(t, err)
	require.Equal(t, 1, res.Delivered)
	require.Len(t, rc.deliveries(), 1)
	require.Equal(t, 2, b.outbox(t, jobID).Attempts)
}

// TestAtLeastOnceWhenTheReplyIsLost: the receiver got the event but its
// reply did not arrive in time; the event is sent again, with the same
// delivery id, so the receiver can tell it is a duplicate.
func TestAtLeastOnceWhenTheReplyIsLost(t *testing.T) {
	t.Parallel()
	rc := newHoldingReceiver(t)
	b := setup(t, rc)
	jobID := b.cancelledJob(t, buyerID, t0)
	d := b.deliverer(t, rc, webhook.Config{Timeout: 200 * time.Millisecond})

	res, err := d.DeliverDue(context.Background(), t0)
	require.NoError(t, err)
	require.Equal(t, 1, res.Failed)
	require.Contains(t, *b.outbox(t, jobID).LastError, "deadline exceeded")
	res, err = d.DeliverDue(context.Background(), t0.Add(base))
	require.NoError(t, err)
	require.Equal(t, 1, res.Delivered)

	got := rc.deliveries()
	require.Len(t, got, 2, "delivered twice: at least once, never zero times")
	require.Equal(t, got[0].Header.Get(webhook.DeliveryHeader), got[1].Header.Get(webhook.DeliveryHeader))
}

// A buyer without a URL gets its row already settled; a row whose buyer's
// URL was removed after it was written is settled by the deliverer.
func TestBuyerWithoutURLIsMarkedDelivered(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	jobID := b.cancelledJob(t, quietBuyerID, t0)
	o := b.outbox(t, jobID)
	require.NotNil(t, o.Delivered, "written delivered: nothing to send")
	require.Equal(t, t0, o.Delivered.UTC())
	require.Equal(t, "no webhook url", *o.LastError)
	d := b.deliverer(t, nil, webhook.Config{})
	res, err := d.DeliverDue(context.Background(), t0)
	require.NoError(t, err)
	require.Equal(t, webhook.Result{}, res, "nothing pending")

	_, err = b.pool.Exec(context.Background(), `UPDATE buyers SET webhook_url = 'http://hooks.invalid/x' WHERE id = $1`, buyerID)
	require.NoError(t, err)
	removed := b.cancelledJob(t, buyerID, t0)
	require.Nil(t, b.outbox(t, removed).Delivered, "a buyer with a URL: pending")
	_, err = b.pool.Exec(context.Background(), `UPDATE buyers SET webhook_url = NULL WHERE id = $1`, buyerID)
	require.NoError(t, err)
	res, err = d.DeliverDue(context.Background(), t0)
	require.NoError(t, err)
	require.Equal(t, webhook.Result{NoURL: 1}, res)
	o = b.outbox(t, removed)
	require.NotNil(t, o.Delivered)
	require.Equal(t, "no webhook url", *o.LastError)
	require.Zero(t, o.Attempts, "nothing was attempted")
}

func TestRunPollsOnItsClock(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t)
	b := setup(t, rc)
	stub := clock.NewStub(t0)
	d := b.deliverer(t, rc, webhook.Config{Clock: stub, PollInterval: time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	waitFor(t, func() bool { return stub.Waiters() > 0 }) // first pass done, nothing due
	b.cancelledJob(t, buyerID, t0)
	require.Empty(t, rc.deliveries())
	stub.Advance(time.Second)
	waitFor(t, func() bool { return len(rc.deliveries()) == 1 })
	cancel()
	require.NoError(t, <-done)
}

func TestBackoff(t *testing.T) {
	t.Parallel()
	for attempts, want := range map[int]time.Duration{1: base, 2: 2 * base, 3: 4 * base, 6: 32 * base, 7: 6 * time.Minute, 1000: 6 * time.Minute} {
		require.Equal(t, want, webhook.Backoff(base, 6*time.Minute, attempts), "attempts %d", attempts)
	}
}

// waitFor polls cond: the loop under test runs on its own goroutine and
// signals nothing else the test could wait on.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached within 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
