package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/server/webhook"
)

// TestWebhookSecretFeedsTheOfficialVerifier: what `admin webhook-secret`
// prints is a secret the official Standard Webhooks library takes as it is
// and that checks the server's signatures; --legacy prints the key of the
// deprecated header.
func TestWebhookSecretFeedsTheOfficialVerifier(t *testing.T) {
	key := bytes.Repeat([]byte{7}, 32)
	keyFile := filepath.Join(t.TempDir(), "key")
	require.NoError(t, os.WriteFile(keyFile, key, 0o600))
	const buyer = "00000000-0000-4000-8000-0000000000b1"
	run := func(extra ...string) string {
		var out bytes.Buffer
		require.NoError(t, adminWebhookSecret(context.Background(),
			append([]string{"--buyer", buyer, "--signing-key-file", keyFile}, extra...), &out, io.Discard))
		return strings.TrimSpace(out.String())
	}
	secret := run()
	require.True(t, strings.HasPrefix(secret, "whsec_"), secret)
	wh, err := standardwebhooks.NewWebhook(secret)
	require.NoError(t, err)
	now := time.Now()
	body := []byte(`{"delivery_id":1}`)
	h := http.Header{}
	h.Set("webhook-id", "1")
	h.Set("webhook-timestamp", strconv.FormatInt(now.Unix(), 10))
	h.Set("webhook-signature", webhook.StandardSign(webhook.BuyerKey(key, buyer), "1", now, body))
	require.NoError(t, wh.Verify(body, h))

	legacy := run("--legacy")
	require.True(t, webhook.Verify(legacy, body, webhook.Sign(webhook.BuyerSecret(key, buyer), body)))
	require.NotEqual(t, secret, legacy)
}
