package webhook_test

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/server/webhook"
)

// TestStandardWebhooksVerifierAcceptsDeliveries checks the real
// deliverer's POSTs with the official Standard Webhooks Go verifier (an
// independent implementation, timestamp tolerance included), given only
// the secret string `rendermac admin webhook-secret` prints. The first
// POST is refused, so the retry is checked too: same webhook-id, a fresh
// timestamp and signature, both verifying.
func TestStandardWebhooksVerifierAcceptsDeliveries(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t, http.StatusInternalServerError)
	b := setup(t, rc)
	// The official verifier compares webhook-timestamp with time.Now, so
	// this test runs its passes at the wall clock's instant.
	now := time.Now().UTC().Truncate(time.Second)
	b.cancelledJob(t, buyerID, now)
	d := b.deliverer(t, rc, webhook.Config{})
	ctx := context.Background()
	res, err := d.DeliverDue(ctx, now)
	require.NoError(t, err)
	require.Equal(t, 1, res.Failed)
	res, err = d.DeliverDue(ctx, now.Add(base))
	require.NoError(t, err)
	require.Equal(t, 1, res.Delivered)

	wh, err := standardwebhooks.NewWebhook(webhook.StandardSecret(signingKey, buyerID))
	require.NoError(t, err)
	got := rc.deliveries()
	require.Len(t, got, 2)
	for i, g := range got {
		require.NoError(t, wh.Verify(g.Body, g.Header), "POST %d must verify with the official library", i)
		require.Equal(t, g.Header.Get(webhook.DeliveryHeader), g.Header.Get("webhook-id"), "one idempotency key")
		require.True(t, webhook.Verify(webhook.BuyerSecret(signingKey, buyerID), g.Body, g.Header.Get(webhook.SignatureHeader)),
			"the deprecated header is still sent and valid")
	}
	require.Equal(t, got[0].Header.Get("webhook-id"), got[1].Header.Get("webhook-id"), "a retry keeps its webhook-id")
	require.Equal(t, strconv.FormatInt(now.Unix(), 10), got[0].Header.Get("webhook-timestamp"))
	require.Equal(t, strconv.FormatInt(now.Add(base).Unix(), 10), got[1].Header.Get("webhook-timestamp"), "a retry is stamped anew")
	require.NotEqual(t, got[0].Header.Get("webhook-signature"), got[1].Header.Get("webhook-signature"))

	// What the verifier must refuse.
	other, err := standardwebhooks.NewWebhook(webhook.StandardSecret(signingKey, quietBuyerID))
	require.NoError(t, err)
	require.ErrorIs(t, other.Verify(got[1].Body, got[1].Header), standardwebhooks.ErrNoMatchingSignature, "another buyer's secret")
	require.ErrorIs(t, wh.Verify(append(got[1].Body, ' '), got[1].Header), standardwebhooks.ErrNoMatchingSignature, "a changed body")
	swapped := got[1].Header.Clone()
	swapped.Set("webhook-timestamp", got[0].Header.Get("webhook-timestamp"))
	require.ErrorIs(t, wh.Verify(got[1].Body, swapped), standardwebhooks.ErrNoMatchingSignature, "a changed timestamp")
	legacy, err := standardwebhooks.NewWebhook(webhook.BuyerSecret(signingKey, buyerID))
	require.NoError(t, err, "the hex secret happens to be valid base64 ...")
	require.ErrorIs(t, legacy.Verify(got[1].Body, got[1].Header), standardwebhooks.ErrNoMatchingSignature,
		"... but it is not the standard secret: receivers must use the base64 one")
}

// TestStandardWebhooksVerifierRefusesAReplay: a delivery stamped outside
// the official verifier's tolerance (5 minutes) is refused as too old,
// although its signature is genuine.
func TestStandardWebhooksVerifierRefusesAReplay(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t)
	b := setup(t, rc)
	then := time.Now().UTC().Add(-10 * time.Minute).Truncate(time.Second)
	b.cancelledJob(t, buyerID, then)
	d := b.deliverer(t, rc, webhook.Config{})
	res, err := d.DeliverDue(context.Background(), then)
	require.NoError(t, err)
	require.Equal(t, 1, res.Delivered)
	got := rc.deliveries()
	require.Len(t, got, 1)
	wh, err := standardwebhooks.NewWebhook(webhook.StandardSecret(signingKey, buyerID))
	require.NoError(t, err)
	require.NoError(t, wh.VerifyIgnoringTimestamp(got[0].Body, got[0].Header), "the signature is genuine")
	require.ErrorIs(t, wh.Verify(got[0].Body, got[0].Header), standardwebhooks.ErrMessageTooOld)
}
