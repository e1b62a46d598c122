package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// Headers of a delivery.
const (
	// SignatureHeader carries "sha256=" + hex HMAC-SHA256(secret, body).
	SignatureHeader = "X-RenderMac-Signature"
	// EventHeader is the event (the job's terminal status).
	EventHeader = "X-RenderMac-Event"
	// DeliveryHeader is the outbox row id: the same on every retry of one
	// event, so receivers can deduplicate.
	DeliveryHeader = "X-RenderMac-Delivery"
)

// secretLabel separates derived webhook secrets from every other use of
// the signing key (grant messages start with "get\n" or "put\n").
const secretLabel = "rendermac webhook secret v1\n"

// SecretPrefix starts every webhook secret, so one is recognisable in a
// config file.
const SecretPrefix = "whsec_"

// BuyerSecret derives a buyer's webhook signing secret from the server's
// signing key: SecretPrefix plus the hex HMAC-SHA256 of a label and the
// buyer id. It is deterministic, so nothing secret needs storing. The
// secret is used as a string: the HMAC key of a signature is its bytes
// exactly as printed, so receivers need no decoding step to get wrong.
func BuyerSecret(signingKey []byte, buyerID string) string {
	m := hmac.New(sha256.New, signingKey)
	m.Write([]byte(secretLabel + buyerID))
	return SecretPrefix + hex.EncodeToString(m.Sum(nil))
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
