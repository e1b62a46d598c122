package scenarios

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/rendermac/rendermac/server/artifact"
)

// errStoreOutage is what the store returns while it is down: an I/O error,
// not artifact.ErrNotFound, so verification must treat it as "unjudged"
// (the attempt stays committing) rather than as a missing output.
var errStoreOutage = errors.New("artifact store unavailable (injected outage): connection refused")

// scStore is the fault-injecting artifact store every stack of a run
// shares: `store down` makes every call fail with errStoreOutage until
// `store up`; the store_bitflip variant corrupts every object it returns.
type scStore struct {
	artifact.Store
	// raw is the store itself, past every injected fault (FS or S3).
	raw  artifact.Store
	r    *scRun
	down atomic.Bool
	// realOutage: the run's S3 server process is stopped (`store down` on S3).
	realOutage atomic.Bool
	full       atomic.Bool
	bitflip    bool
	// dropWhenFull is the store_drops_when_full variant: a full disk
	// acknowledges a write it did not make.
	dropWhenFull bool
	// unsealed is the unsealed_outputs variant.
	unsealed bool

	mu sync.Mutex
	// failNext counts, by operation, the next calls to fail (`store fail`).
	failNext map[string]int
	// beforeSeal, when set, runs once before a seal's copy (`store
	// overwrite-at-seal`), with the key being sealed.
	beforeSeal func(key string)
}

// errDiskFull is what a full disk returns on write.
var errDiskFull = fmt.Errorf("artifact store: %w", syscall.ENOSPC)

func (s *scStore) fault(op, key string) error {
	if !s.down.Load() && !s.takeFailure(op) {
		return nil
	}
	s.r.count("store.errors", 1)
	s.r.tl.add(laneDatabase, fmt.Sprintf("artifact store refused %s %s (outage)", op, s.r.keyName(key)))
	return fmt.Errorf("%s %s: %w", op, key, errStoreOutage)
}

// takeFailure reports whether this call of op is one `store fail` armed.
func (s *scStore) takeFailure(op string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failNext[op] == 0 {
		return false
	}
	s.failNext[op]--
	return true
}

// Put implements artifact.Store.
func (s *scStore) Put(ctx context.Context, key string, r io.Reader) (artifact.Object, error) {
	return s.PutIf(ctx, key, r, nil)
}

// PutIf implements artifact.Store. The unsealed_outputs variant drops the
// guard: an upload is published whatever the attempt's state, which is
// how the server behaved before outputs were sealed at their claim.
func (s *scStore) PutIf(ctx context.Context, key string, r io.Reader, guard artifact.Guard) (artifact.Object, error) {
	if err := s.fault("put", key); err != nil {
		return artifact.Object{}, err
	}
	if s.full.Load() {
		s.r.count("store.full", 1)
		if s.dropWhenFull { // broken on purpose: claims the bytes were stored
			s.r.tl.add(laneDatabase, "artifact store (full) acknowledged put "+s.r.keyName(key)+" without storing it")
			n, _ := io.Copy(io.Discard, r)
			return artifact.Object{Key: key, Bytes: n}, nil
		}
		s.r.tl.add(laneDatabase, "artifact store refused put "+s.r.keyName(key)+": no space left on device")
		return artifact.Object{}, fmt.Errorf("put %s: %w", key, errDiskFull)
	}
	if s.unsealed && guard != nil { // broken on purpose: nothing seals a claimed output
		guard = nil
	}
	obj, err := s.Store.PutIf(ctx, key, r, guard)
	err = s.observe("put", key, err)
	if err != nil && guard != nil {
		s.r.tl.add(laneDatabase, fmt.Sprintf("upload to %s refused: %v", s.r.keyName(key), err))
	}
	return obj, err
}

// Create implements artifact.Creator when the store itself does (FS):
// the artifact handler writes a buyer's upload create-only through it.
func (s *scStore) Create(ctx context.Context, key string, r io.Reader) (artifact.Object, error) {
	c, ok := s.Store.(artifact.Creator)
	if !ok {
		return artifact.Object{}, fmt.Errorf("create %s: the store %T writes nothing create-only", key, s.Store)
	}
	if err := s.fault("put", key); err != nil {
		return artifact.Object{}, err
	}
	obj, err := c.Create(ctx, key, r)
	return obj, s.observe("put", key, err)
}

// Link implements artifact.Linker: a job's input from a checked upload.
func (s *scStore) Link(ctx context.Context, src, dst string) (artifact.Object, error) {
	l, ok := s.Store.(artifact.Linker)
	if !ok {
		return artifact.Object{}, fmt.Errorf("link %s: the store %T cannot link", dst, s.Store)
	}
	if err := s.fault("link", dst); err != nil {
		return artifact.Object{}, err
	}
	obj, err := l.Link(ctx, src, dst)
	return obj, s.observe("put", dst, err)
}

// Open implements artifact.Store.
func (s *scStore) Open(ctx context.Context, key string) (artifact.Reader, artifact.Object, error) {
	if err := s.fault("open", key); err != nil {
		return nil, artifact.Object{}, err
	}
	rd, obj, err := s.Store.Open(ctx, key)
	err = s.observe("open", key, err)
	if err != nil || !s.bitflip || obj.Bytes == 0 {
		return rd, obj, err
	}
	return &flipReader{Reader: rd, at: obj.Bytes - 1}, obj, nil
}

// Stat implements artifact.Store.
func (s *scStore) Stat(ctx context.Context, key string) (artifact.Object, error) {
	if err := s.fault("stat", key); err != nil {
		return artifact.Object{}, err
	}
	obj, err := s.Store.Stat(ctx, key)
	return obj, s.observe("stat", key, err)
}

// Delete implements artifact.Store.
func (s *scStore) Delete(ctx context.Context, key string) error {
	if err := s.fault("delete", key); err != nil {
		return err
	}
	return s.observe("delete", key, s.Store.Delete(ctx, key))
}

// flipReader returns the object with the byte at offset at inverted, through
// both reading interfaces, as silent corruption on a disk would.
type flipReader struct {
	artifact.Reader
	off, at int64
}

func (f *flipReader) Read(p []byte) (int, error) {
	n, err := f.Reader.Read(p)
	f.flip(p[:n], f.off)
	f.off += int64(n)
	return n, err
}

func (f *flipReader) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.Reader.ReadAt(p, off)
	f.flip(p[:n], off)
	return n, err
}

func (f *flipReader) flip(p []byte, off int64) {
	if f.at >= off && f.at < off+int64(len(p)) {
		p[f.at-off] ^= 0xff
	}
}

// storeFail arms `store fail OP [n=N]`.
func (r *scRun) storeFail(st scStep) error {
	op := arg(st, 1)
	n, err := optInt(st, "n", 1)
	if err != nil {
		return err
	}
	switch op {
	case "link", "copy", "open", "stat", "put":
	default:
		return fmt.Errorf("store fail %q: want link, copy, open, stat or put", op)
	}
	r.store.mu.Lock()
	if r.store.failNext == nil {
		r.store.failNext = map[string]int{}
	}
	r.store.failNext[op] += n
	r.store.mu.Unlock()
	r.tl.add(laneDatabase, fmt.Sprintf("artifact store: the next %d %s call(s) fail", n, op))
	return nil
}

// storeOverwrite writes other bytes, unconditionally and past the control
// plane, at the output key of a job's last attempt: what a bucket that
// ignored If-None-Match would let a late PUT do. Only on S3: on a
// directory the control plane's handler is the only writer of that key,
// and nothing but it may write there.
func (r *scRun) storeOverwrite(st scStep) error {
	if r.s3 == nil {
		return fmt.Errorf("store %s: only on S3 (store=s3)", arg(st, 0))
	}
	job := arg(st, 1)
	id, err := r.jobID(job)
	if err != nil {
		return err
	}
	var attempt string
	if err := r.observer.QueryRow(r.ctx, `SELECT id::text FROM job_attempts WHERE job_id = $1 ORDER BY attempt_number DESC LIMIT 1`,
		id).Scan(&attempt); err != nil {
		return fmt.Errorf("store %s %s: its last attempt: %w", arg(st, 0), job, err)
	}
	key := artifact.OutputKey(id, attempt)
	overwrite := func() error {
		data := []byte("bytes nobody verified, at " + key)
		if _, err := r.s3.store.Put(r.ctx, key, bytes.NewReader(data)); err != nil {
			return fmt.Errorf("overwrite %s: %w", r.keyName(key), err)
		}
		r.count("store.overwritten", 1)
		r.tl.add(laneDatabase, fmt.Sprintf("bucket: the %s overwritten past the condition (%d other bytes)", r.keyName(key), len(data)))
		return nil
	}
	if arg(st, 0) == "overwrite" {
		return overwrite()
	}
	r.store.mu.Lock()
	r.store.beforeSeal = func(sealed string) {
		if sealed != key {
			r.tl.add(laneDatabase, "FAILED overwrite-at-seal: the seal is of "+r.keyName(sealed)+", not the "+r.keyName(key))
			return
		}
		if err := overwrite(); err != nil {
			r.tl.add(laneDatabase, "FAILED "+err.Error())
		}
	}
	r.store.mu.Unlock()
	r.tl.add(laneDatabase, fmt.Sprintf("armed: the %s is overwritten just before verification seals it", r.keyName(key)))
	return nil
}
