package artifact

import (
	"io"
	"sync"
)

// copyBufferBytes is io.Copy's own buffer size.
const copyBufferBytes = 32 << 10

// copyBuffers holds the buffers of copyPooled. io.Copy allocates a fresh
// 32 KiB buffer on every call whose reader and writer offer no shortcut,
// which is every call here (the context-checking reader, the hashing
// writers); with an object written at create, one at upload and one read
// back at commit, that was about 96 KiB of garbage a job, a third of the
// control plane's allocation at peak (`rendermac bench`).
var copyBuffers = sync.Pool{New: func() any { b := make([]byte, copyBufferBytes); return &b }}

// copyPooled is io.Copy through a pooled buffer.
func copyPooled(dst io.Writer, src io.Reader) (int64, error) {
	b := copyBuffers.Get().(*[]byte)
	defer copyBuffers.Put(b)
	return io.CopyBuffer(dst, src, *b)
}
