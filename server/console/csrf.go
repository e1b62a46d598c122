package console

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strings"
)

// Console actions (SPEC section 6, "Console actions") change the system, so
// each is a POST that must carry its session's synchronizer token: a MAC of
// what authenticated the request (the session cookie's value, or the hash
// of a bearer credential) under a key derived for this purpose alone. A
// page on another site can make a browser send the cookie (SameSite aside)
// but can never read the token, so it cannot forge the form.
const (
	// CSRFField is the form field an action's POST carries its token in.
	CSRFField = "csrf"
	// ConfirmField is the form field an action's confirmation page sets to
	// ConfirmValue; a POST without it changes nothing.
	ConfirmField = "confirm"
	ConfirmValue = "yes"
	csrfPurpose  = "console-csrf"
	csrfTagSize  = 24
	// maxActionForm bounds an action's form body.
	maxActionForm = 4096
)

// session is who a guarded request is: the operator and what bound the
// request to them (the cookie value or "bearer:" and the credential's
// hash), the input of the CSRF token.
type session struct {
	operatorID string
	binding    string
}

type sessionKey struct{}

func withSession(r *http.Request, s session) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), sessionKey{}, s))
}

func sessionOf(ctx context.Context) (session, bool) {
	s, ok := ctx.Value(sessionKey{}).(session)
	return s, ok && s.operatorID != ""
}

// OperatorID is the operator a guarded console request is from ("" outside
// the guard).
func OperatorID(r *http.Request) string {
	s, _ := sessionOf(r.Context())
	return s.operatorID
}

// CSRFToken returns the synchronizer token of r's session, for an action's
// form; "" outside the guard. It is the same for every form of a session
// and useless with any other session.
func (c *Console) CSRFToken(r *http.Request) string {
	s, ok := sessionOf(r.Context())
	if !ok {
		return ""
	}
	return c.csrfToken(s)
}

func (c *Console) csrfToken(s session) string {
	m := hmac.New(sha256.New, c.csrfKey)
	m.Write([]byte(s.binding))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:csrfTagSize])
}

// Action guards a console action: the request must pass the console's
// guard (an operator's session or credential: anything else is 401 or 403
// as for pages), be a POST carrying its session's token in CSRFField
// (compared in constant time; missing or wrong: 403 csrf_refused, nothing
// changed) and ConfirmField=ConfirmValue (missing: 400, nothing changed).
// Every POST route of an action is registered through it.
func (c *Console) Action(h http.Handler) http.Handler {
	return c.guard(c.checkAction(h))
}

// checkAction is Action's part after the guard.
func (c *Console) checkAction(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s, ok := sessionOf(r.Context())
		if !ok || r.Method != http.MethodPost {
			c.refuseCode(w, r, http.StatusForbidden, CodeCSRFRefused, "a console action is a POST from its confirmation page")
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxActionForm)
		if err := r.ParseForm(); err != nil {
			c.refuse(w, r, http.StatusBadRequest, "unreadable form: "+err.Error())
			return
		}
		got := r.PostForm.Get(CSRFField)
		if !hmac.Equal([]byte(got), []byte(c.csrfToken(s))) {
			c.refuseCode(w, r, http.StatusForbidden, CodeCSRFRefused,
				"the form's CSRF token is missing or is not this session's; open the action's confirmation page again")
			return
		}
		if strings.TrimSpace(r.PostForm.Get(ConfirmField)) != ConfirmValue {
			c.refuse(w, r, http.StatusBadRequest, "the action was not confirmed ("+ConfirmField+"="+ConfirmValue+" is required); use its confirmation page")
			return
		}
		h.ServeHTTP(w, r)
	})
}

// CodeCSRFRefused is the error code of an action POST without its
// session's CSRF token.
const CodeCSRFRefused = "csrf_refused"
