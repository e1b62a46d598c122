package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/agent/runner"
	"github.com/rendermac/rendermac/harness/deviceclient"
	"github.com/rendermac/rendermac/protocol"
)

// chromiumInstall is what a machine without a browser needs.
const chromiumInstall = "apt-get install -y chromium"

// findChromium returns the headless browser's path, or fails the test
// naming the install command: the browser test never skips.
func findChromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("RENDERMAC_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatalf("no Chromium found on PATH (nor RENDERMAC_CHROMIUM): the console's browser test needs it; run `%s` (.ci/setup, which make test runs, does)", chromiumInstall)
	return ""
}

// screenshotDir is where the browser test keeps its screenshots:
// $RENDERMAC_TEST_ARTIFACTS/console, else harness/e2e/testdata/out/console
// (gitignored). Each run overwrites the previous run's files.
func screenshotDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join("testdata", "out", "console")
	if base := os.Getenv("RENDERMAC_TEST_ARTIFACTS"); base != "" {
		dir = filepath.Join(base, "console")
	}
	abs, err := filepath.Abs(dir)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(abs, 0o755))
	return abs
}

// browser is one headless Chromium tab.
type browser struct {
	t    *testing.T
	ctx  context.Context
	dir  string
	base string
	shot []string
}

// browserStarts is how many times newBrowser starts Chromium before it
// fails: on a loaded machine a start now and then dies before it prints
// its DevTools address, which says nothing about the console.
const browserStarts = 3

func newBrowser(t *testing.T, base string) *browser { return newBrowserSized(t, base, 1400, 1000) }

// newBrowserSized starts a tab whose window is width x height pixels.
func newBrowserSized(t *testing.T, base string, width, height int) *browser {
	t.Helper()
	path := findChromium(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.WindowSize(width, height), chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WSURLReadTimeout(90*time.Second))
	for try := 1; ; try++ {
		actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
		ctx, cancelTab := chromedp.NewContext(actx)
		// Start the browser now (on the tab's own context: a timeout on
		// the first run would stop the browser with it), so a broken
		// install fails here.
		err := chromedp.Do(ctx)
		if err == nil {
			t.Cleanup(func() {
				cancelTab()
				cancelAlloc()
			})
			return &browser{t: t, ctx: ctx, dir: screenshotDir(t), base: base}
		}
		cancelTab()
		cancelAlloc()
		if try == browserStarts {
			t.Fatalf("start %s (%d tries; is it installed? %s): %v", path, try, chromiumInstall, err)
		}
		t.Logf("start %s, try %d: %v", path, try, err)
	}
}

// actionTimeout bounds one browser step on a loaded 2-core machine.
const actionTimeout = 45 * time.Second

// run runs steps within actionTimeout.
func (b *browser) run(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, actionTimeout)
	defer cancel()
	require.NoError(b.t, chromedp.Do(ctx, steps...), "browser: %s", what)
}

// value runs one action with a result within actionTimeout.
func value[T any](b *browser, what string, a chromedp.Action[T]) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, actionTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	require.NoError(b.t, err, "browser: %s", what)
	return v
}

// text is the text content of the first element matching sel.
func (b *browser) text(sel string) string {
	b.t.Helper()
	return value(b, "read "+sel, chromedp.TextContent(chromedp.CSS(sel)))
}

// waitText waits until the element sel's text contains want, without
// navigating: only the page's own live update can change it.
func (b *browser) waitText(sel, want string) {
	b.t.Helper()
	js := fmt.Sprintf(`(function(){var e=document.querySelector(%q);return !!e && e.textContent.indexOf(%q)>=0})()`, sel, want)
	value(b, fmt.Sprintf("wait for %q in %s", want, sel), chromedp.Poll[bool](js, chromedp.WithPollingInterval(50*time.Millisecond)))
}

// screenshot saves the full page as NAME.png.
func (b *browser) screenshot(name string) {
	b.t.Helper()
	png := value(b, "screenshot "+name, chromedp.FullScreenshot(100))
	path := filepath.Join(b.dir, name+".png")
	require.NoError(b.t, os.WriteFile(path, png, 0o644))
	b.shot = append(b.shot, path)
}

// navigate opens a console path and marks the document, so that a later
// check can tell a live update (same document) from a reload.
func (b *browser) navigate(path string) {
	b.t.Helper()
	b.run("open "+path, chromedp.Navigate(b.base+path), chromedp.WaitReady(chromedp.CSS("#main")))
	value(b, "mark "+path, chromedp.Evaluate[bool](`window.__loaded = true`))
}

// requireSameDocument fails if the page was reloaded since navigate.
func (b *browser) requireSameDocument() {
	b.t.Helper()
	same := value(b, "same document", chromedp.Evaluate[bool](`window.__loaded === true`))
	require.True(b.t, same, "the page changed by a reload, not by its live update")
}

// TestConsoleInBrowser drives the console in headless Chromium against a
// real control plane: it logs in with an operator credential through the
// form, watches a job on its page move by server-sent events alone
// (submitted, leased by a device the test drives, downloading, cancelled
// by the buyer and ended by the device's fail), then a job a real agent
// runs and commits, and takes a screenshot of every page
// (harness/e2e/testdata/out/console/*.png, or $RENDERMAC_TEST_ARTIFACTS/console).
func TestConsoleInBrowser(t *testing.T) {
	s := newConsoleStack(t, 20*time.Second)
	b := newBrowser(t, s.baseURL())
	ctx := context.Background()

	// No session: the login page, with the server's 401 message.
	b.navigate("/console/")
	require.Contains(t, b.text("#main"), "Log in")
	b.screenshot("01-login")
	b.run("log in", chromedp.SendKeys(chromedp.CSS(`input[name="credential"]`), s.operator),
		chromedp.Submit(chromedp.CSS(`form.login`)), chromedp.WaitVisible(chromedp.CSS("#devices")))

	// A device the test drives, so that each step is seen on screen.
	driven, _ := s.pair(runner.ServiceSynthetic)
	c, _, err := deviceclient.Dial(ctx, deviceclient.WSURL(s.baseURL(), "/v1/provider/ws"), driven.DeviceToken)
	require.NoError(t, err)
	defer c.Close()

	job := s.createJob(runner.ServiceSynthetic, map[string]string{"seed": "watched", "delay_ms": "600000"}, nil)
	b.navigate("/console/jobs/" + job.ID)
	b.waitText("#job-status", "queued")
	b.waitText("#live-state", "on")
	b.screenshot("02-job-queued")

	deviceclient.MustHello(t, c, []string{runner.ServiceSynthetic}, 1, 1)
	offer := deviceclient.Expect[protocol.LeaseOffer](t, c)
	require.Equal(t, job.ID, offer.JobID)
	b.waitText("#job-status", "active")
	b.waitText("#attempt-1 h3", "leased")
	b.waitText("#timeline", "issued")
	b.screenshot("03-job-leased")

	deviceclient.MustSend(t, c, deviceclient.Progress(offer, protocol.AttemptDownloading))
	deviceclient.Expect[protocol.ProgressOK](t, c)
	b.waitText("#attempt-1 h3", "downloading")

	// The fleet shows the device online with its slot used.
	b.navigate("/console/")
	b.waitText("#devices", "online")
	require.Equal(t, "1", b.text("#slots-used"))
	b.waitText("#attempts", "downloading")
	b.screenshot("04-fleet")

	b.navigate("/console/jobs/" + job.ID)
	cn, err := s.buyer.Cancel(ctx, job.ID)
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, cn.Status)
	b.waitText("#job-status", "cancelling")
	cancel := deviceclient.Expect[protocol.Cancel](t, c)
	require.Equal(t, offer.AttemptID, cancel.AttemptID)
	deviceclient.MustSend(t, c, deviceclient.Fail(offer, protocol.FailBuyerCancelled))
	deviceclient.Expect[protocol.FailOK](t, c)
	b.waitText("#job-status", "cancelled")
	b.waitText("#attempt-1 .ended", "buyer_cancelled")
	b.waitText("#timeline", "presented")
	b.waitText("#hold", "released")
	b.requireSameDocument()
	b.screenshot("05-job-cancelled")
	c.Close()

	// A real agent runs and commits the next job, seen on its page.
	creds, _ := s.pair(runner.ServiceSynthetic)
	runAgent(t, "agent", creds, agentOptions{})
	done := s.createJob(runner.ServiceSynthetic, map[string]string{"seed": "committed", "delay_ms": "1500"}, nil)
	b.navigate("/console/jobs/" + done.ID)
	b.waitText("#job-status", "succeeded")
	b.waitText("#attempt-1", "committing")
	b.waitText("#attempt-1 .ended", "succeeded")
	b.requireSameDocument()
	b.screenshot("06-job-committed")
	s.requireSucceededOutput(s.waitTerminal(done.ID))

	// The remaining pages.
	b.navigate("/console/queue")
	b.waitText("#throughput", "1") // one succeeded, one cancelled in the window
	b.screenshot("07-queue")
	b.navigate("/console/jobs")
	require.Contains(t, b.text("#jobs"), done.ID)
	require.Contains(t, b.text("#jobs"), job.ID)
	b.screenshot("08-jobs")
	b.navigate("/console/jobs?status=cancelled")
	jobs := b.text("#jobs")
	require.Contains(t, jobs, job.ID)
	require.NotContains(t, jobs, done.ID, "the status filter")
	b.navigate("/console/jobs?limit=1")
	b.run("older page", chromedp.Click(chromedp.CSS("#next")), chromedp.WaitReady(chromedp.CSS("#jobs")))
	require.Contains(t, b.text("#jobs"), job.ID, "the keyset page after the newest job")
	b.screenshot("09-jobs-page-2")
	b.navigate("/console/cards")
	require.Contains(t, b.text("#cards"), "FAIL")
	b.screenshot("10-cards")
	b.navigate("/console/cards/" + s.cards[1])
	b.screenshot("11-card")
	b.navigate("/console/cards/diff?a=" + s.cards[0] + "&b=" + s.cards[1])
	require.Contains(t, b.text("#diff"), "commit_after_cancel")
	b.screenshot("12-card-diff")

	t.Logf("screenshots:\n%s", strings.Join(b.shot, "\n"))
}
