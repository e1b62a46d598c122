// Package syncbuf is a bytes.Buffer that one goroutine may write (a
// subprocess's or a logger's output) while others read it, and a Writer
// that goroutines running at once may share.
package syncbuf

import (
	"bytes"
	"io"
	"sync"
)

// Writer serialises writes to W, for phases that run at once and share one
// output.
type Writer struct {
	mu sync.Mutex
	W  io.Writer
}

// Write writes p to W, one call at a time.
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.W.Write(p)
}

// Buffer is safe for concurrent Write and String; the zero value is ready.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
