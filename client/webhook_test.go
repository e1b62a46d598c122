package client_test

import (
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"strconv"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/client"
)

// VerifyWebhook accepts a delivery signed as the Standard Webhooks
// reference library signs one (and so as the control plane does, whose
// own test checks it against that library), and refuses a changed body, a
// changed id, another secret and a timestamp beyond the tolerance.
func TestVerifyWebhook(t *testing.T) {
	t.Parallel()
	key := make([]byte, 32)
	_, err := rand.Read(key)
	require.NoError(t, err)
	secret := "whsec_" + base64.StdEncoding.EncodeToString(key)
	wh, err := standardwebhooks.NewWebhook(secret)
	require.NoError(t, err)
	now := time.Unix(1_900_000_000, 0)
	body := []byte(`{"delivery_id":7,"event":"succeeded","job_id":"j1"}`)
	sign := func(id string, at time.Time, body []byte) http.Header {
		sig, err := wh.Sign(id, at, body)
		require.NoError(t, err)
		return http.Header{"Webhook-Id": {id}, "Webhook-Timestamp": {strconv.FormatInt(at.Unix(), 10)},
			"Webhook-Signature": {"v1,bm90IHRoaXMgb25l " + sig}} // a rotated-out signature first
	}
	h := sign("7", now, body)
	require.NoError(t, client.VerifyWebhook(secret, h, body, now))
	require.NoError(t, client.VerifyWebhook(secret, h, body, now.Add(client.WebhookTolerance)))

	require.ErrorIs(t, client.VerifyWebhook(secret, h, []byte(`{"delivery_id":7,"event":"failed","job_id":"j1"}`), now), client.ErrWebhookSignature)
	other := h.Clone()
	other.Set("webhook-id", "8")
	require.ErrorIs(t, client.VerifyWebhook(secret, other, body, now), client.ErrWebhookSignature)
	require.ErrorIs(t, client.VerifyWebhook("whsec_"+base64.StdEncoding.EncodeToString(make([]byte, 32)), h, body, now), client.ErrWebhookSignature)
	require.ErrorContains(t, client.VerifyWebhook(secret, h, body, now.Add(client.WebhookTolerance+time.Second)), "beyond")
	require.ErrorContains(t, client.VerifyWebhook("not a secret", h, body, now), "whsec_")
	require.ErrorContains(t, client.VerifyWebhook(secret, http.Header{}, body, now), "missing webhook-id")
}
