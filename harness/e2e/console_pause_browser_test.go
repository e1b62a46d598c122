package e2e

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/agent/runner"
	"github.com/rendermac/rendermac/harness/deviceclient"
	"github.com/rendermac/rendermac/protocol"
)

// TestConsolePausesServiceInBrowser drives the services page in headless
// Chromium (SPEC section 3, "Pausing a service"): with a job queued, the
// operator pauses synthetic.mp4 through the confirmation step; a device
// that runs it connects with a free slot and is offered nothing, the job
// stays queued; the operator resumes it and the device is offered the job.
// A buyer's API key and a device token get 403 on the action, and a POST
// without the CSRF token (from the logged-in browser itself, and with the
// operator's bearer credential) is refused 403 and changes nothing.
// Screenshots: pause-*.png beside the console test's.
func TestConsolePausesServiceInBrowser(t *testing.T) {
	s := newConsoleStack(t, 20*time.Second)
	b := newBrowser(t, s.baseURL())
	ctx := context.Background()
	svc := runner.ServiceSynthetic
	row := `tr[data-service="` + svc + `"]`

	b.navigate("/console/")
	b.run("log in", chromedp.SendKeys(chromedp.CSS(`input[name="credential"]`), s.operator),
		chromedp.Submit(chromedp.CSS(`form.login`)), chromedp.WaitVisible(chromedp.CSS("#devices")))

	job := s.createJob(svc, map[string]string{"seed": "paused", "delay_ms": "600000"}, nil)
	b.navigate("/console/services")
	b.waitText(row, "offered")
	b.screenshot("pause-01-services")
	b.run("pause…", chromedp.Click(chromedp.CSS(`a[id="pause-`+svc+`"]`)), chromedp.WaitVisible(chromedp.CSS("#confirm")))
	require.Contains(t, b.text("#main"), "still fail admission_expired")
	b.screenshot("pause-02-confirm")
	b.run("confirm pause", chromedp.Click(chromedp.CSS(`button[id="confirm-pause"]`)), chromedp.WaitVisible(chromedp.CSS("#message")))
	require.Contains(t, b.text("#message"), svc+": paused")
	b.waitText(row, "paused")
	b.screenshot("pause-03-paused")

	// A device that runs the service, one slot free: no offer while paused.
	driven, _ := s.pair(svc)
	c, _, err := deviceclient.Dial(ctx, deviceclient.WSURL(s.baseURL(), "/v1/provider/ws"), driven.DeviceToken)
	require.NoError(t, err)
	defer c.Close()
	deviceclient.MustHello(t, c, []string{svc}, 1, 1)
	deviceclient.ExpectNone(t, c, 500*time.Millisecond, "an offer of a paused service's job")
	b.navigate("/console/jobs/" + job.ID)
	b.waitText("#job-status", "queued")

	// Refused: a buyer's key and a device token (403), and a POST without
	// the CSRF token, whoever sends it.
	post := func(bearer, csrf string) int {
		form := url.Values{}
		if csrf != "" {
			form.Set("csrf", csrf)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.baseURL()+"/console/services/"+svc+"/resume",
			strings.NewReader(form.Encode()))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Authorization", "Bearer "+bearer)
		resp, err := s.client.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	require.Equal(t, http.StatusForbidden, post(s.buyer.Key, "x"), "a buyer's API key")
	require.Equal(t, http.StatusForbidden, post(driven.DeviceToken, "x"), "a device token")
	require.Equal(t, http.StatusForbidden, post(s.operator, ""), "the operator's credential without the CSRF token")
	require.Equal(t, http.StatusForbidden, post(s.operator, "forged"), "the operator's credential with a wrong CSRF token")
	b.navigate("/console/services")
	value(b, "POST resume without the token", chromedp.Evaluate[bool](`(function(){var f=document.createElement('form');
f.method='post';f.action='/console/services/`+svc+`/resume';document.body.appendChild(f);f.submit();return true})()`))
	b.run("wait for the refusal page", chromedp.WaitVisible(chromedp.CSS("p#message")))
	require.Contains(t, b.text("#main"), "CSRF token")
	require.Contains(t, b.text("#main"), "CSRF token")
	b.screenshot("pause-04-no-csrf")
	b.navigate("/console/services")
	b.waitText(row, "paused") // nothing of the refused POSTs resumed it
	deviceclient.ExpectNone(t, c, 200*time.Millisecond, "an offer after refused resumes")

	// Resume: the device is offered the job at once.
	b.run("resume…", chromedp.Click(chromedp.CSS(`a[id="resume-`+svc+`"]`)), chromedp.WaitVisible(chromedp.CSS("#confirm")))
	b.run("confirm resume", chromedp.Click(chromedp.CSS(`button[id="confirm-resume"]`)), chromedp.WaitVisible(chromedp.CSS("#message")))
	require.Contains(t, b.text("#message"), svc+": resumed")
	offer := deviceclient.Expect[protocol.LeaseOffer](t, c)
	require.Equal(t, job.ID, offer.JobID)
	b.waitText(row, "offered")
	b.screenshot("pause-05-resumed")
	b.navigate("/console/jobs/" + job.ID)
	b.waitText("#job-status", "active")
	b.waitText("#attempt-1 h3", "leased")
	b.screenshot("pause-06-job-leased")

	var audit []string
	rows, err := s.plane.Pool.Query(ctx, `SELECT action || ':' || actor || ':' || operator_id::text FROM service_pause_events WHERE service = $1 ORDER BY seq`, svc)
	require.NoError(t, err)
	for rows.Next() {
		var a string
		require.NoError(t, rows.Scan(&a))
		audit = append(audit, a)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{"pause:operator:" + s.operatorID, "resume:operator:" + s.operatorID}, audit)
	t.Logf("screenshots:\n%s", strings.Join(b.shot, "\n"))
}
