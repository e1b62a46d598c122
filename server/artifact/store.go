package artifact

import (
	"context"
	"errors"
	"io"
	"strings"
)

// ErrNotFound reports that no object exists at a key. Backends wrap it, so test
// with errors.Is.
var ErrNotFound = errors.New("artifact: object not found")

// Object describes a stored object.
type Object struct {
	// Key is the object's key.
	Key string
	// Bytes is the object's size.
	Bytes int64
	// SHA256 is the lowercase hex SHA-256 of the content, filled in by Put from
	// the bytes it wrote. Stat and Open leave it empty unless the backend
	// recorded it, because a digest that was not recomputed from the content is
	// no evidence of the content; Verify always hashes the bytes itself.
	SHA256 string
}

// Guard decides, at the last moment, whether an upload is published: it
// calls publish (at most once) under whatever lock makes the decision hold,
// or returns an error to refuse.
type Guard func(publish func() error) error

// Reader is an open object: sequential reads for streaming and hashing, random
// access for media checks (mp4.Check takes an io.ReaderAt). The caller closes it.
type Reader interface {
	io.Reader
	io.ReaderAt
	io.Closer
}

// Store holds objects under keys that pass ValidateKey. Every method validates
// its key and fails with ErrInvalidKey before touching storage. Implementations
// are safe for concurrent use.
type Store interface {
	// Put stores the content of r at key, replacing any previous object, and
	// returns its size and SHA-256. Readers never see a partial object: they see
	// the previous object (or none) until the new one is whole, and if r fails
	// or ctx ends before then, the key is unchanged.
	// Callers bound r (e.g. http.MaxBytesReader); Put stores whatever it reads.
	Put(ctx context.Context, key string, r io.Reader) (Object, error)
	// PutIf is Put with a guard around publication: once the content is
	// whole and durable under a temporary name, guard is called with the
	// function that publishes it at key, and the object appears only if
	// guard calls it; if guard returns an error the key is unchanged (or,
	// if publish ran, holds the new object) and that error is returned.
	// The guard lets a caller make "may this key still be written?" and
	// the write one step, without holding anything while the body streams.
	PutIf(ctx context.Context, key string, r io.Reader, guard Guard) (Object, error)
	// Open returns the object at key with its size, or an error matching
	// ErrNotFound.
	Open(ctx context.Context, key string) (Reader, Object, error)
	// Stat returns the object's size, or an error matching ErrNotFound.
	Stat(ctx context.Context, key string) (Object, error)
	// Delete removes the object at key, or returns an error matching ErrNotFound.
	Delete(ctx context.Context, key string) error
}

// Sealer is a Store whose output keys the control plane cannot fence:
// agents write them directly with presigned URLs (S3), so a late PUT can
// land on an output key after its commit's claim. On a Sealer, Verify
// judges a private snapshot of the output and, when it passes, copies that
// snapshot to SealedKey(key); only the sealed key is ever served or re-read
// (ServedKey), and no grant ever names it. See docs/semantics.md.
type Sealer interface {
	Store
	// Copy makes dst a copy of src in one atomic write of dst, without
	// the bytes leaving the store; ErrNotFound when src has no object.
	Copy(ctx context.Context, src, dst string) (Object, error)
}

// ServedKey is the key that holds the bytes served for key: on a Sealer, an
// output key's sealed copy; anywhere else, key itself.
func ServedKey(st Store, key string) string {
	if _, ok := st.(Sealer); ok && strings.HasPrefix(key, outputsPrefix) {
		return SealedKey(key)
	}
	return key
}

// ctxReader stops a copy once ctx ends, so a cancelled upload or verification
// releases its goroutine instead of reading to the end of a large object.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
