package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"
)

// progress shows long work on a terminal: a redrawn line with each running
// phase's done/total, rate and ETA (one phase in full; several, as qualify
// runs its scenarios beside its campaigns, side by side in short), and a
// phase's last line kept when it ends. It writes nothing when its writer is
// not a terminal, so logs, CI and redirected runs stay free of it and
// stdout is never touched.
type progress struct {
	mu     sync.Mutex
	w      io.Writer
	tty    bool
	now    func() time.Time
	phases map[string]*phase
	active []string // phases updated and not done, in order of first update
}

// phase is one phase's first update and latest count.
type phase struct {
	start       time.Time
	done, total int
}

// line renders ph as the one running phase (full) or one of several (short).
func (ph *phase) line(name string, t time.Time, full bool) string {
	if full {
		return progressLine(name, ph.done, ph.total, t.Sub(ph.start))
	}
	return shortProgress(name, ph.done, ph.total, t.Sub(ph.start))
}

func newProgress(w io.Writer) *progress {
	tty := false
	if f, ok := w.(*os.File); ok {
		tty = term.IsTerminal(int(f.Fd()))
	}
	return &progress{w: w, tty: tty, now: time.Now, phases: map[string]*phase{}}
}

func (p *progress) Update(name string, done, total int) {
	if p == nil || !p.tty {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	t := p.now()
	ph := p.phases[name]
	if ph == nil {
		ph = &phase{start: t}
		p.phases[name] = ph
	}
	if !slices.Contains(p.active, name) {
		p.active = append(p.active, name)
	}
	ph.done, ph.total = done, total
	fmt.Fprintf(p.w, "\r%s", p.lineLocked(t))
}

// lineLocked renders the running phases: the one in full, several short.
func (p *progress) lineLocked(t time.Time) string {
	if len(p.active) == 1 {
		return p.phases[p.active[0]].line(p.active[0], t, true)
	}
	parts := make([]string, len(p.active))
	for i, n := range p.active {
		parts[i] = p.phases[n].line(n, t, false)
	}
	return strings.Join(parts, " | ") + "\x1b[K"
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

// shortProgress is one of several running phases: name, count, ETA.
func shortProgress(name string, done, total int, elapsed time.Duration) string {
	line := fmt.Sprintf("%s %d/%d", name, done, total)
	if done > 0 && elapsed > 0 {
		eta := time.Duration(float64(total-done) * float64(elapsed) / float64(done)).Round(time.Second)
		line += fmt.Sprintf(" ETA %s", eta)
	}
	return line
}

// Done ends phase name: its last line stays, on a line of its own, and the
// phases still running are redrawn below it.
func (p *progress) Done(name string) {
	if p == nil || !p.tty {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	i := slices.Index(p.active, name)
	if i < 0 {
		return
	}
	t := p.now()
	fmt.Fprintf(p.w, "\r%s\n", p.phases[name].line(name, t, true))
	p.active = slices.Delete(p.active, i, i+1)
	if len(p.active) > 0 {
		fmt.Fprintf(p.w, "\r%s", p.lineLocked(t))
	}
}
