package client

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Webhook headers (SPEC section 6, the Standard Webhooks format).
const (
	WebhookIDHeader        = "webhook-id"
	WebhookTimestampHeader = "webhook-timestamp"
	WebhookSignatureHeader = "webhook-signature"
)

// WebhookTolerance is how far a delivery's timestamp may be from the
// receiver's clock (the Standard Webhooks libraries' 5 minutes): a
// captured delivery cannot be replayed later than that.
const WebhookTolerance = 5 * time.Minute

// ErrWebhookSignature is a delivery whose signature does not verify.
var ErrWebhookSignature = errors.New("webhook: no signature matches")

// VerifyWebhook checks a delivery the control plane POSTed: secret is the
// buyer's `whsec_<base64>` (rendermac admin webhook-secret), header and
// body the request's headers and exact body bytes, now the receiver's
// clock. It returns nil when one of the webhook-signature's v1 signatures
// is the HMAC-SHA256 of "<webhook-id>.<webhook-timestamp>.<body>"
// (compared in constant time) and the timestamp is within
// WebhookTolerance of now. Use webhook-id to drop a delivery already
// handled: a retry carries the same id.
func VerifyWebhook(secret string, header http.Header, body []byte, now time.Time) error {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil || len(key) == 0 {
		return fmt.Errorf("webhook: the secret is not whsec_ and base64")
	}
	id, ts := header.Get(WebhookIDHeader), header.Get(WebhookTimestampHeader)
	if id == "" || ts == "" {
		return fmt.Errorf("webhook: missing %s or %s header", WebhookIDHeader, WebhookTimestampHeader)
	}
	secs, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("webhook: %s %q is not Unix seconds", WebhookTimestampHeader, ts)
	}
	if d := now.Sub(time.Unix(secs, 0)); d > WebhookTolerance || d < -WebhookTolerance {
		return fmt.Errorf("webhook: timestamp %s is %s from now, beyond %s", ts, d.Round(time.Second), WebhookTolerance)
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id + "." + ts + "."))
	m.Write(body)
	want := m.Sum(nil)
	// The header is space-separated "v1,<base64>" entries (a sender may
	// sign with several keys while rotating).
	for _, sig := range strings.Fields(header.Get(WebhookSignatureHeader)) {
		version, b64, ok := strings.Cut(sig, ",")
		if !ok || version != "v1" {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(b64)
		if err == nil && hmac.Equal(got, want) {
			return nil
		}
	}
	return ErrWebhookSignature
}
