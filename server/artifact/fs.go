package artifact

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
)

// tempPrefix starts the names of in-progress uploads. It contains '~', which no
// valid key segment may, so a partial upload can never be addressed as an object.
const tempPrefix = ".put~"

// FS is a Store in a local directory; key "a/b" is the file a/b under it.
//
// All access goes through an os.Root, so no key, ".." or symlink can reach a file
// outside the directory; keys are also validated, and symlinks at a key's final
// component are refused as not found, so links planted inside the tree cannot
// alias one object as another. On a case-insensitive filesystem (macOS default)
// keys that differ only in case name the same object; the contract's keys are
// built from lowercase UUIDs.
type FS struct {
	root *os.Root
	// noSync skips every fsync (NewFSUnsynced).
	noSync bool
}

var _ Store = (*FS)(nil)

// NewFS returns an FS rooted at dir, creating it if needed. Close releases it.
func NewFS(dir string) (*FS, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("artifact: create store root: %w", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("artifact: open store root: %w", err)
	}
	return &FS{root: root}, nil
}

// NewFSUnsynced is NewFS for a test harness's throwaway store: it skips
// every fsync and does everything else alike (the temporary file, the
// guarded rename). An fsync only decides what survives an OS crash, which
// no run on such a store has (docs/semantics.md, "Campaign comparisons");
// crash scenarios use NewFS.
func NewFSUnsynced(dir string) (*FS, error) {
	s, err := NewFS(dir)
	if err == nil {
		s.noSync = true
	}
	return s, err
}

// Close releases the directory handle; the FS must not be used afterwards.
func (s *FS) Close() error { return s.root.Close() }

// Put writes r to a temporary file beside the key's path, fsyncs it, renames it
// over the key and fsyncs the directories, so a crash leaves the previous object
// or the new one, never a torn file. If r fails or ctx ends, the temporary file
// is removed and the key is untouched. An error after the rename (directory
// fsync) means the new object is visible but may not survive a crash; a retry
// with the same content is safe.
func (s *FS) Put(ctx context.Context, key string, r io.Reader) (Object, error) {
	return s.PutIf(ctx, key, r, nil)
}

// PutIf is Put whose rename runs inside guard (nil: always publish). The
// temporary file is removed unless guard published it.
func (s *FS) PutIf(ctx context.Context, key string, r io.Reader, guard Guard) (Object, error) {
	return s.put(ctx, key, r, guard, false)
}

// put is PutIf; createOnly publishes with a hard link instead of a rename,
// which fails (ErrExists) when key has an object, atomically with the check.
func (s *FS) put(ctx context.Context, key string, r io.Reader, guard Guard, createOnly bool) (Object, error) {
	name, dir, tmp, err := s.tempBeside(ctx, "put", key)
	if err != nil {
		return Object{}, err
	}
	f, err := s.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o640)
	if err != nil {
		return Object{}, fmt.Errorf("artifact: put %q: create temporary file: %w", key, err)
	}
	obj, err := writeSynced(ctx, f, r, !s.noSync)
	published := false
	publish := func() error {
		if published {
			return errors.New("published twice")
		}
		if !createOnly {
			if err := s.root.Rename(tmp, name); err != nil {
				return err
			}
			published = true
			return nil
		}
		if err := s.root.Link(tmp, name); err != nil {
			if errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("%w: %s", ErrExists, key)
			}
			return err
		}
		published = true
		_ = s.root.Remove(tmp) // the object is published under name
		return nil
	}
	if err == nil {
		if guard == nil {
			err = publish()
		} else if gerr := guard(publish); gerr != nil {
			if !published {
				_ = s.root.Remove(tmp)
			}
			return Object{}, gerr // the guard's refusal, as it said it
		}
	}
	if errors.Is(err, ErrExists) {
		_ = s.root.Remove(tmp)
		return Object{}, err
	}
	if err != nil {
		_ = s.root.Remove(tmp) // best effort; the name is unreachable as a key anyway
		return Object{}, fmt.Errorf("artifact: put %q: %w", key, err)
	}
	if !published {
		_ = s.root.Remove(tmp)
		return Object{}, fmt.Errorf("artifact: put %q: the guard neither published nor refused", key)
	}
	if err := s.syncDirs(dir); err != nil {
		return Object{}, fmt.Errorf("artifact: put %q: sync directory: %w", key, err)
	}
	obj.Key = key
	return obj, nil
}

// tempBeside validates key and returns its path, its directory (created)
// and a fresh temporary name in that directory, for op's error messages.
func (s *FS) tempBeside(ctx context.Context, op, key string) (name, dir, tmp string, err error) {
	if name, err = s.name(ctx, key); err != nil {
		return "", "", "", err
	}
	dir = filepath.Dir(name)
	if err := s.root.MkdirAll(dir, 0o750); err != nil {
		return "", "", "", fmt.Errorf("artifact: %s %q: create directory: %w", op, key, err)
	}
	return name, dir, filepath.Join(dir, tempPrefix+rand.Text()), nil
}

// writeSynced copies r into f while hashing, then fsyncs (if sync) and closes f;
// the rename that publishes f must not happen before its data is durable.
func writeSynced(ctx context.Context, f *os.File, r io.Reader, sync bool) (Object, error) {
	h := sha256.New()
	n, err := copyPooled(io.MultiWriter(f, h), ctxReader{ctx: ctx, r: r})
	if err != nil {
		err = fmt.Errorf("write: %w", err)
	} else if sync {
		if err = f.Sync(); err != nil {
			err = fmt.Errorf("fsync: %w", err)
		}
	}
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close: %w", cerr)
	}
	return Object{Bytes: n, SHA256: hex.EncodeToString(h.Sum(nil))}, err
}

// syncDirs fsyncs dir and each ancestor up to the root, making the rename and
// any directories MkdirAll just created durable.
func (s *FS) syncDirs(dir string) error {
	if runtime.GOOS == "windows" || s.noSync {
		return nil // Windows: directories cannot be fsynced, renames are journaled
	}
	for {
		d, err := s.root.Open(dir)
		if err != nil {
			return err
		}
		err = d.Sync()
		if cerr := d.Close(); err == nil {
			err = cerr
		}
		if err != nil || dir == "." {
			return err
		}
		dir = filepath.Dir(dir)
	}
}

// Open opens the object at key for reading.
func (s *FS) Open(ctx context.Context, key string) (Reader, Object, error) {
	name, err := s.name(ctx, key)
	if err != nil {
		return nil, Object{}, err
	}
	if _, err := s.lstatRegular(key, name); err != nil {
		return nil, Object{}, err
	}
	f, err := s.root.Open(name)
	if err != nil {
		return nil, Object{}, opError("open", key, err)
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("%w: %s is not a regular file", ErrNotFound, key)
	}
	if err != nil {
		_ = f.Close()
		return nil, Object{}, opError("open", key, err)
	}
	return f, Object{Key: key, Bytes: fi.Size()}, nil
}

// Stat reports the object's size without reading it.
func (s *FS) Stat(ctx context.Context, key string) (Object, error) {
	name, err := s.name(ctx, key)
	if err != nil {
		return Object{}, err
	}
	fi, err := s.lstatRegular(key, name)
	if err != nil {
		return Object{}, err
	}
	return Object{Key: key, Bytes: fi.Size()}, nil
}

// Delete removes the object; empty directories are left for later Puts.
func (s *FS) Delete(ctx context.Context, key string) error {
	name, err := s.name(ctx, key)
	if err != nil {
		return err
	}
	if _, err := s.lstatRegular(key, name); err != nil {
		return err
	}
	if err := s.root.Remove(name); err != nil {
		return opError("delete", key, err)
	}
	return nil
}

// name validates key and maps it to a root-relative path. filepath.IsLocal is a
// second, lexical guard in case ValidateKey is ever loosened.
func (s *FS) name(ctx context.Context, key string) (string, error) {
	if err := ValidateKey(key); err != nil {
		return "", err
	}
	name := filepath.FromSlash(key)
	if !filepath.IsLocal(name) {
		return "", keyError(key, "not a local path")
	}
	return name, ctx.Err()
}

// lstatRegular refuses anything at the key that is not a plain file (a symlink,
// a directory), reporting it as not found: no object was ever put there.
func (s *FS) lstatRegular(key, name string) (fs.FileInfo, error) {
	fi, err := s.root.Lstat(name)
	if err != nil {
		return nil, opError("stat", key, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s is not a regular file", ErrNotFound, key)
	}
	return fi, nil
}

// opError maps "no such file" and "a path component is a file" to ErrNotFound;
// anything else is an I/O failure the caller may retry.
func opError(op, key string, err error) error {
	if errors.Is(err, ErrNotFound) {
		return err
	}
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return fmt.Errorf("%w: %s", ErrNotFound, key)
	}
	return fmt.Errorf("artifact: %s %q: %w", op, key, err)
}
