package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
)

// progress shows long work: a redrawn bar on a terminal, a plain line every
// tenth otherwise (logs and CI do not want carriage returns).
type progress struct {
	mu   sync.Mutex
	w    io.Writer
	tty  bool
	last map[string]int
}

func newProgress(w io.Writer) *progress {
	tty := false
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil {
			tty = st.Mode()&os.ModeCharDevice != 0
		}
	}
	return &progress{w: w, tty: tty, last: map[string]int{}}
}

func (p *progress) update(name string, done, total int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty {
		const width = 30
		n := done * width / total
		fmt.Fprintf(p.w, "\r%-20s [%s%s] %d/%d", name, strings.Repeat("#", n), strings.Repeat(".", width-n), done, total)
		return
	}
	tenth := done * 10 / total
	if tenth > p.last[name] || done == total {
		p.last[name] = tenth
		fmt.Fprintf(p.w, "%s: %d/%d\n", name, done, total)
	}
}

func (p *progress) done(string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty {
		fmt.Fprintln(p.w)
	}
}
