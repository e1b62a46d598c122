package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/agent/runner"
	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/api"
	"github.com/rendermac/rendermac/server/console"
)

// heldSynthetic is the synthetic runner held until the test releases it:
// the render is "in progress" for exactly as long as the test needs.
type heldSynthetic struct{ started, release chan struct{} }

func (h heldSynthetic) Run(ctx context.Context, spec runner.Spec, in, out string) error {
	h.started <- struct{}{}
	select {
	case <-h.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return runner.Synthetic{}.Run(ctx, spec, in, out)
}

// click clicks sel and waits until after appears (a new page, by form
// submission or link).
func (b *browser) click(what, sel, after string) {
	b.t.Helper()
	b.run(what, chromedp.Click(chromedp.CSS(sel)), chromedp.WaitVisible(chromedp.CSS(after)))
}

// postAction POSTs an action's form as a bearer secret would, with a CSRF
// token and the confirmation, and returns the status and body.
func (s *consoleStack) postAction(t *testing.T, path, bearer, token string) (int, string) {
	t.Helper()
	form := url.Values{console.CSRFField: {token}, console.ConfirmField: {console.ConfirmValue}}
	req, err := http.NewRequest(http.MethodPost, s.baseURL()+path, strings.NewReader(form.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Authorization", "Bearer "+bearer)
	resp, err := s.client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

// TestConsoleActionsInBrowser drives the console's actions in headless
// Chromium, in an 800 px wide window, against a real control plane and a
// real agent: an operator drains the agent's device while it renders (the
// render commits, the job created after the drain is not offered to it,
// its Run returns), cancels a queued job from its page, is refused when
// the form's CSRF token is removed, and revokes the device. A buyer's key
// and a device token get 403 on every action's POST. Screenshots go to
// harness/e2e/testdata/out/console (or $RENDERMAC_TEST_ARTIFACTS/console),
// named 2N-*.png.
func TestConsoleActionsInBrowser(t *testing.T) {
	s := newConsoleStack(t, 20*time.Second)
	b := newBrowserSized(t, s.baseURL(), 800, 1000)
	b.navigate("/console/")
	b.run("log in", chromedp.SendKeys(chromedp.CSS(`input[name="credential"]`), s.operator),
		chromedp.Submit(chromedp.CSS(`form.login`)), chromedp.WaitVisible(chromedp.CSS("#devices")))
	b.requireFits("fleet")

	// A real agent with two slots whose render the test holds.
	creds, _ := s.pair(runner.ServiceSynthetic)
	held := heldSynthetic{started: make(chan struct{}, 4), release: make(chan struct{})}
	run := runAgent(t, "drained agent", creds, agentOptions{slots: 2,
		runners: map[string]runner.Runner{runner.ServiceSynthetic: held}})
	params := map[string]string{"seed": "drained"}
	rendering := s.createJob(runner.ServiceSynthetic, params, nil)
	s.waitAttemptStatus(rendering.ID, 1, protocol.AttemptRunning)
	select {
	case <-held.started:
	case <-time.After(stopTimeout):
		t.Fatal("the held render did not start")
	}

	device := "/console/devices/" + creds.DeviceID
	b.navigate(device)
	b.waitText("#device-status", "online")
	b.waitText("#device-attempts", "running")
	b.requireFits("device")
	b.screenshot("21-device-rendering")

	b.click("open the drain page", "#drain", "#confirm-form")
	require.Contains(t, b.text("#consequence"), "running attempts finish")
	b.screenshot("22-drain-confirm")
	b.click("confirm the drain", "#confirm", "#flash")
	require.Equal(t, "drain: draining", b.text("#flash"))
	require.Contains(t, b.text("#device-actions"), "drain")
	require.Contains(t, b.text("#device-actions"), "e2e operator")
	b.screenshot("23-device-drained")

	// Created after the drain while the agent still has a free slot: it
	// must not be offered to it.
	later := s.createJob(runner.ServiceSynthetic, map[string]string{"seed": "after the drain"}, nil)
	close(held.release)
	s.requireSucceededOutput(s.waitTerminal(rendering.ID))
	select {
	case err := <-run.done:
		require.NoError(t, err, "a drained agent's Run returns nil once its render committed")
		run.once.Do(func() {})
	case <-time.After(stopTimeout):
		t.Fatalf("the drained agent did not stop within %v of its last commit", stopTimeout)
	}
	d := s.job(later.ID)
	require.Equal(t, protocol.JobQueued, d.Status, "the job created after the drain: %s", describe(d))
	require.Empty(t, d.Attempts, "the drained device was offered the job created after the drain")
	b.navigate(device)
	b.waitText("#device-attempts", "succeeded")
	b.screenshot("24-device-drained-committed")

	// The queued job (no device left) is cancelled from its page.
	job := "/console/jobs/" + later.ID
	b.navigate(job)
	b.waitText("#job-status", "queued")
	b.requireFits("job")
	b.screenshot("25-job-queued")
	b.click("open the cancel page", "#cancel", "#confirm-form")
	b.screenshot("26-cancel-confirm")
	b.click("confirm the cancel", "#confirm", "#flash")
	require.Equal(t, "cancel: cancelled", b.text("#flash"))
	b.waitText("#job-status", "cancelled")
	require.Contains(t, b.text("#timeline"), "operator e2e operator ("+s.operatorID+")")
	b.screenshot("27-job-cancelled-by-operator")

	// A buyer's key and a device token are 403 on every action, even with
	// a form the operator's session could have sent.
	for _, path := range []string{job + "/cancel", device + "/drain", device + "/revoke"} {
		for who, secret := range map[string]string{"buyer API key": s.buyer.Key, "device token": creds.DeviceToken} {
			status, body := s.postAction(t, path, secret, "x")
			require.Equal(t, http.StatusForbidden, status, "%s POST %s: %s", who, path, body)
			require.Contains(t, body, `"code":"forbidden"`, "%s POST %s", who, path)
		}
	}

	// The revoke form without its CSRF token: refused, the device as it was.
	b.navigate(device + "/revoke")
	value(b, "remove the CSRF field", chromedp.Evaluate[bool](
		fmt.Sprintf(`(function(){var e=document.querySelector('input[name=%q]');e.remove();return true})()`, console.CSRFField)))
	b.click("submit without the token", "#confirm", "#message")
	require.Contains(t, b.text("#message"), "CSRF token is missing")
	b.screenshot("28-csrf-refused")
	devices, err := api.ListDevices(context.Background(), s.plane.Pool)
	require.NoError(t, err)
	for _, dv := range devices {
		require.NotEqual(t, "revoked", dv.Status, "a refused revoke revoked %s", dv.ID)
	}

	b.navigate(device + "/revoke")
	b.click("confirm the revoke", "#confirm", "#flash")
	require.Equal(t, "revoke: revoked", b.text("#flash"))
	b.waitText("#device-status", "revoked")
	b.screenshot("29-device-revoked")

	t.Logf("screenshots:\n%s", strings.Join(b.shot, "\n"))
}

// requireFits fails when the page is wider than its window: tables must
// fit an 800 px window (they wrap or scroll inside main, never the page).
func (b *browser) requireFits(page string) {
	b.t.Helper()
	over := value(b, "measure "+page, chromedp.Evaluate[int](
		`document.documentElement.scrollWidth - document.documentElement.clientWidth`))
	require.LessOrEqual(b.t, over, 0, "the %s page is %d px wider than the window", page, over)
}
