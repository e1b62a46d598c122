package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strconv"
	"strings"
	"time"
)

// Headers of a delivery.
const (
	// IDHeader, TimestampHeader and StandardSignatureHeader are the
	// Standard Webhooks headers (https://www.standardwebhooks.com): the
	// message id (the delivery id, the same on every retry), the Unix
	// seconds of this attempt, and "v1," + base64 HMAC-SHA256 of
	// "id.timestamp.body" (StandardSign).
	IDHeader                = "webhook-id"
	TimestampHeader         = "webhook-timestamp"
	StandardSignatureHeader = "webhook-signature"
	// SignatureHeader carries "sha256=" + hex HMAC-SHA256(secret, body).
	// Deprecated: kept for one release beside StandardSignatureHeader; it
	// covers no timestamp, so a receiver cannot refuse a replay with it.
	SignatureHeader = "X-RenderMac-Signature"
	// EventHeader is the event (the job's terminal status).
	EventHeader = "X-RenderMac-Event"
	// DeliveryHeader is the outbox row id: the same on every retry of one
	// event, so receivers can deduplicate. IDHeader carries the same value.
	DeliveryHeader = "X-RenderMac-Delivery"
)

// secretLabel separates derived webhook secrets from every other use of
// the signing key (grant messages start with "get\n" or "put\n").
const secretLabel = "rendermac webhook secret v1\n"

// SecretPrefix starts every webhook secret, so one is recognisable in a
// config file.
const SecretPrefix = "whsec_"

// BuyerKey derives a buyer's 32-byte webhook key from the server's
// signing key: HMAC-SHA256(signingKey, label + buyer id). It is
// deterministic, so nothing secret needs storing. Both secrets below are
// spellings of it.
func BuyerKey(signingKey []byte, buyerID string) []byte {
	m := hmac.New(sha256.New, signingKey)
	m.Write([]byte(secretLabel + buyerID))
	return m.Sum(nil)
}

// StandardSecret is the buyer's secret in the Standard Webhooks form:
// SecretPrefix plus the standard base64 of BuyerKey. Verifiers strip the
// prefix and base64-decode the rest to get the HMAC key.
func StandardSecret(signingKey []byte, buyerID string) string {
	return SecretPrefix + base64.StdEncoding.EncodeToString(BuyerKey(signingKey, buyerID))
}

// BuyerSecret is the buyer's secret for the deprecated SignatureHeader:
// SecretPrefix plus the hex of BuyerKey, used as a string: the HMAC key of
// that signature is the secret's bytes exactly as printed.
func BuyerSecret(signingKey []byte, buyerID string) string {
	return SecretPrefix + hex.EncodeToString(BuyerKey(signingKey, buyerID))
}

// StandardSign returns the StandardSignatureHeader value of a delivery
// with message id id sent at ts under key (BuyerKey): "v1," + base64
// HMAC-SHA256(key, id + "." + unix seconds + "." + body).
func StandardSign(key []byte, id string, ts time.Time, body []byte) string {
	signed := id + "." + strconv.FormatInt(ts.Unix(), 10) + "."
	m := hmac.New(sha256.New, key)
	m.Write([]byte(signed))
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// Sign returns the SignatureHeader value for body under secret:
// "sha256=" + hex HMAC-SHA256(key = secret's bytes, body).
func Sign(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Verify reports whether header is a valid SignatureHeader for body under
// secret, comparing in constant time. Receivers written in Go can use it.
func Verify(secret string, body []byte, header string) bool {
	if !strings.HasPrefix(header, "sha256=") {
		return false
	}
	return hmac.Equal([]byte(Sign(secret, body)), []byte(header))
}
