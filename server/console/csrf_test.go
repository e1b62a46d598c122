package console

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCheckActionCSRF: an action runs only with its session's token and the
// confirm field; another session's token, none, or a GET are refused and
// the handler never runs.
func TestCheckActionCSRF(t *testing.T) {
	t.Parallel()
	c := &Console{csrfKey: []byte("0123456789abcdef0123456789abcdef"), tmpl: templates()}
	a := session{operatorID: "00000000-0000-4000-8000-000000000001", binding: "cookie:A"}
	b := session{operatorID: a.operatorID, binding: "cookie:B"}
	require.NotEqual(t, c.csrfToken(a), c.csrfToken(b), "two sessions share a token")
	require.Equal(t, c.csrfToken(a), c.csrfToken(a))
	ran := 0
	h := c.checkAction(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { ran++; w.WriteHeader(http.StatusNoContent) }))
	do := func(method string, s session, form url.Values) int {
		req := httptest.NewRequest(method, "/console/jobs/x/cancel", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Accept", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, withSession(req, s))
		return rec.Code
	}
	good := url.Values{CSRFField: {c.csrfToken(a)}, ConfirmField: {ConfirmValue}}
	require.Equal(t, http.StatusForbidden, do(http.MethodPost, a, url.Values{ConfirmField: {ConfirmValue}}), "no token")
	require.Equal(t, http.StatusForbidden, do(http.MethodPost, b, good), "another session's token")
	require.Equal(t, http.StatusForbidden, do(http.MethodGet, a, good), "a GET")
	require.Equal(t, http.StatusBadRequest, do(http.MethodPost, a, url.Values{CSRFField: {c.csrfToken(a)}}), "not confirmed")
	require.Equal(t, 0, ran, "a refused action ran")
	require.Equal(t, http.StatusNoContent, do(http.MethodPost, a, good))
	require.Equal(t, 1, ran)
}
