package console

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"

	"github.com/rendermac/rendermac/server/api"
)

// csrfField is the form field of the console's actions that carries the
// synchronizer token.
const csrfField = "csrf"

// csrfToken is the synchronizer token of the request's authentication: an
// HMAC, under a key derived from the session key, of the session cookie's
// value (or of the bearer credential's hash). Only a page the console
// served to that session holds it: another site can make the browser send
// the cookie (SameSite=Strict already stops most of that) but cannot read
// the token, so it cannot forge an action. A new login is a new cookie and
// so a new token; nothing is stored.
func (c *Console) csrfToken(r *http.Request) string {
	binding := ""
	if ck, err := r.Cookie(CookieName); err == nil {
		binding = "cookie\n" + ck.Value
	} else if secret := bearer(r); secret != "" {
		binding = "bearer\n" + api.HashSecret(secret)
	}
	key := hmac.New(sha256.New, c.sessionKey)
	key.Write([]byte("console-csrf"))
	mac := hmac.New(sha256.New, key.Sum(nil))
	mac.Write([]byte(binding))
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// csrfOK reports whether the POST's form carries the request's token,
// compared in constant time.
func (c *Console) csrfOK(r *http.Request) bool {
	got := r.PostFormValue(csrfField)
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(c.csrfToken(r))) == 1
}
