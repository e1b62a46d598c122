package protocol

import (
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// FailMessageMaxBytes bounds a fail frame's message as the control plane
// stores and shows it (SPEC section 5).
const FailMessageMaxBytes = 512

// Redacted stands where a secret was cut out of a message.
const Redacted = "[redacted]"

var (
	// A URL's query holds a presigned grant's signature.
	urlQuery = regexp.MustCompile(`(?i)(https?://[^\s?#"'<>]*)\?[^\s"'<>]*`)
	// The project's own credentials (API keys, device tokens, operator
	// credentials) and an Authorization header's value.
	credential = regexp.MustCompile(`\brm[kdo]_[A-Za-z0-9_-]+|(?i)\bbearer\s+\S+`)
)

// CleanFailMessage makes a fail frame's message fit to store and to show a
// buyer: every secret given (the attempt's commit token, say) and every
// credential of the project's forms and URL query (a presigned grant's
// signature) replaced by Redacted, control characters folded to spaces, text
// that is not UTF-8 repaired, and the whole cut to FailMessageMaxBytes at a
// character boundary. The agent cleans what it sends; the control plane
// cleans again what it stores, whatever a device sent.
func CleanFailMessage(msg string, secrets ...string) string {
	msg = strings.ToValidUTF8(msg, "\uFFFD")
	for _, s := range secrets {
		if len(s) >= 8 { // a short "secret" would cut ordinary words
			msg = strings.ReplaceAll(msg, s, Redacted)
		}
	}
	msg = urlQuery.ReplaceAllString(msg, "$1?"+Redacted)
	msg = credential.ReplaceAllStringFunc(msg, func(m string) string {
		if strings.HasPrefix(strings.ToLower(m), "bearer") {
			return "Bearer " + Redacted
		}
		return Redacted
	})
	msg = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, msg)
	msg = strings.TrimSpace(msg)
	if len(msg) <= FailMessageMaxBytes {
		return msg
	}
	cut := FailMessageMaxBytes
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut]
}
