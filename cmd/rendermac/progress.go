package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"
)

// progress shows long work on a terminal: a redrawn line per phase with
// done/total, rate and ETA. It writes nothing when its writer is not a
// terminal, so logs, CI and redirected runs stay free of it and stdout is
// never touched.
type progress struct {
	mu    sync.Mutex
	w     io.Writer
	tty   bool
	now   func() time.Time
	start map[string]time.Time
}

func newProgress(w io.Writer) *progress {
	tty := false
	if f, ok := w.(*os.File); ok {
		tty = term.IsTerminal(int(f.Fd()))
	}
	return &progress{w: w, tty: tty, now: time.Now, start: map[string]time.Time{}}
}

func (p *progress) update(name string, done, total int) {
	if p == nil || !p.tty {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	t := p.now()
	if _, ok := p.start[name]; !ok {
		p.start[name] = t
	}
	fmt.Fprintf(p.w, "\r%s", progressLine(name, done, total, t.Sub(p.start[name])))
}

// progressLine renders one phase's state: bar, count, rate and ETA.
func progressLine(name string, done, total int, elapsed time.Duration) string {
	const width = 30
	n := 0
	if total > 0 {
		n = min(done*width/total, width)
	}
	line := fmt.Sprintf("%-26s [%s%s] %d/%d", name, strings.Repeat("#", n), strings.Repeat(".", width-n), done, total)
	if done > 0 && elapsed > 0 {
		rate := float64(done) / elapsed.Seconds()
		eta := time.Duration(float64(total-done) / rate * float64(time.Second)).Round(time.Second)
		line += fmt.Sprintf("  %.1f/s  ETA %s", rate, eta)
	}
	return line + "\x1b[K"
}

func (p *progress) done(string) {
	if p == nil || !p.tty {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintln(p.w)
}
