package artifact

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type fsBundle struct {
	dir   string
	store *FS
}

func setupFS(t *testing.T) fsBundle {
	t.Helper()
	dir := t.TempDir()
	store, err := NewFS(dir)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, store.Close()) })
	return fsBundle{dir: dir, store: store}
}

func hexSHA256(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// files lists every file under dir, to prove no temporary file is left behind.
func files(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, filepath.ToSlash(rel))
		}
		return err
	}))
	return out
}

func TestFSRoundTrip(t *testing.T) {
	t.Parallel()
	b := setupFS(t)
	ctx := context.Background()
	key := OutputKey("job", "attempt")
	content := []byte("hello, render")

	obj, err := b.store.Put(ctx, key, bytes.NewReader(content))
	require.NoError(t, err)
	require.Equal(t, Object{Key: key, Bytes: int64(len(content)), SHA256: hexSHA256(content)}, obj)

	st, err := b.store.Stat(ctx, key)
	require.NoError(t, err)
	require.Equal(t, Object{Key: key, Bytes: int64(len(content))}, st)

	r, obj, err := b.store.Open(ctx, key)
	require.NoError(t, err)
	got, err := io.ReadAll(r)
	require.NoError(t, err)
	require.NoError(t, r.Close())
	require.Equal(t, content, got)
	require.Equal(t, int64(len(content)), obj.Bytes)
	require.Equal(t, []string{key}, files(t, b.dir))

	// Put replaces.
	_, err = b.store.Put(ctx, key, strings.NewReader("v2"))
	require.NoError(t, err)
	data, err := os.ReadFile(filepath.Join(b.dir, filepath.FromSlash(key)))
	require.NoError(t, err)
	require.Equal(t, "v2", string(data))

	require.NoError(t, b.store.Delete(ctx, key))
	_, err = b.store.Stat(ctx, key)
	require.ErrorIs(t, err, ErrNotFound)
	require.ErrorIs(t, b.store.Delete(ctx, key), ErrNotFound)
}

func TestFSNotFound(t *testing.T) {
	t.Parallel()
	b := setupFS(t)
	ctx := context.Background()
	_, err := b.store.Put(ctx, "inputs/j", strings.NewReader("x"))
	require.NoError(t, err)
	require.NoError(t, os.Mkdir(filepath.Join(b.dir, "adir"), 0o750))

	// Missing, a path through a file, and a directory are all "no object".
	for _, key := range []string{"inputs/nope", "inputs/j/child", "adir", "inputs"} {
		_, err := b.store.Stat(ctx, key)
		require.ErrorIs(t, err, ErrNotFound, key)
		_, _, err = b.store.Open(ctx, key)
		require.ErrorIs(t, err, ErrNotFound, key)
		require.ErrorIs(t, b.store.Delete(ctx, key), ErrNotFound, key)
	}
}

func TestFSRejectsInvalidKeys(t *testing.T) {
	t.Parallel()
	b := setupFS(t)
	ctx := context.Background()
	for _, key := range []string{"../escape", "/abs", "a//b", `a\b`, "", ".", "a/../../b"} {
		_, err := b.store.Put(ctx, key, strings.NewReader("x"))
		require.ErrorIs(t, err, ErrInvalidKey, key)
		_, _, err = b.store.Open(ctx, key)
		require.ErrorIs(t, err, ErrInvalidKey, key)
		_, err = b.store.Stat(ctx, key)
		require.ErrorIs(t, err, ErrInvalidKey, key)
		require.ErrorIs(t, b.store.Delete(ctx, key), ErrInvalidKey, key)
	}
	// Nothing was written anywhere, including beside the root.
	require.Empty(t, files(t, filepath.Dir(b.dir)))
}

// errAfter yields n bytes and then fails, like an upload whose connection drops.
type errAfter struct {
	n   int
	err error
}

func (e *errAfter) Read(p []byte) (int, error) {
	if e.n == 0 {
		return 0, e.err
	}
	k := min(len(p), e.n)
	for i := range k {
		p[i] = 'x'
	}
	e.n -= k
	return k, nil
}

func TestFSPutIsAtomic(t *testing.T) {
	t.Parallel()
	b := setupFS(t)
	ctx := context.Background()
	drop := errors.New("connection reset")

	// A failed first upload leaves nothing at the key and no temporary file.
	_, err := b.store.Put(ctx, "inputs/j", &errAfter{n: 100 << 10, err: drop})
	require.ErrorIs(t, err, drop)
	_, err = b.store.Stat(ctx, "inputs/j")
	require.ErrorIs(t, err, ErrNotFound)
	require.Empty(t, files(t, b.dir))

	// A failed replacement leaves the previous object whole.
	_, err = b.store.Put(ctx, "inputs/j", strings.NewReader("original"))
	require.NoError(t, err)
	_, err = b.store.Put(ctx, "inputs/j", &errAfter{n: 3, err: drop})
	require.ErrorIs(t, err, drop)
	r, obj, err := b.store.Open(ctx, "inputs/j")
	require.NoError(t, err)
	got, err := io.ReadAll(r)
	require.NoError(t, err)
	require.NoError(t, r.Close())
	require.Equal(t, "original", string(got))
	require.Equal(t, int64(8), obj.Bytes)
	require.Equal(t, []string{"inputs/j"}, files(t, b.dir))

	// A cancelled context aborts the copy the same way.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = b.store.Put(cctx, "inputs/k", strings.NewReader("data"))
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, []string{"inputs/j"}, files(t, b.dir))
}

// TestFSConcurrentPuts races writers on one key: the survivor is one whole upload.
func TestFSConcurrentPuts(t *testing.T) {
	t.Parallel()
	b := setupFS(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			_, err := b.store.Put(ctx, "outputs/j/a.mp4", bytes.NewReader(bytes.Repeat([]byte{byte('a' + i)}, 64<<10)))
			assert.NoError(t, err) // not require: FailNow must not run off the test goroutine
		})
	}
	wg.Wait()
	data, err := os.ReadFile(filepath.Join(b.dir, "outputs", "j", "a.mp4"))
	require.NoError(t, err)
	require.Len(t, data, 64<<10)
	require.Equal(t, bytes.Repeat(data[:1], 64<<10), data)
	require.Equal(t, []string{"outputs/j/a.mp4"}, files(t, b.dir))
}

func TestFSSymlinksStayInside(t *testing.T) {
	t.Parallel()
	b := setupFS(t)
	ctx := context.Background()
	outside := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(outside, "secret"), []byte("secret"), 0o600))
	_, err := b.store.Put(ctx, "inputs/real", strings.NewReader("real"))
	require.NoError(t, err)

	// A directory link leading out of the root must not be followed.
	require.NoError(t, os.Symlink(outside, filepath.Join(b.dir, "evil")))
	_, _, err = b.store.Open(ctx, "evil/secret")
	require.Error(t, err)
	_, err = b.store.Put(ctx, "evil/planted", strings.NewReader("x"))
	require.Error(t, err)
	_, err = os.Stat(filepath.Join(outside, "planted"))
	require.ErrorIs(t, err, fs.ErrNotExist)

	// A link at a key, even to an object inside, is not an object.
	require.NoError(t, os.Symlink("real", filepath.Join(b.dir, "inputs", "alias")))
	_, _, err = b.store.Open(ctx, "inputs/alias")
	require.ErrorIs(t, err, ErrNotFound)
	_, err = b.store.Stat(ctx, "inputs/alias")
	require.ErrorIs(t, err, ErrNotFound)
}

// PutIf publishes only through its guard: a refusal leaves the previous
// object and no temporary file; the guard runs after the body is whole, so
// a body that fails never reaches it.
func TestFSPutIfPublishesOnlyThroughTheGuard(t *testing.T) {
	t.Parallel()
	b := setupFS(t)
	ctx := context.Background()
	_, err := b.store.Put(ctx, "outputs/j/a.mp4", strings.NewReader("committed"))
	require.NoError(t, err)

	sealed := errors.New("sealed")
	calls := 0
	refuse := func(func() error) error { calls++; return sealed }
	_, err = b.store.PutIf(ctx, "outputs/j/a.mp4", strings.NewReader("late"), refuse)
	require.ErrorIs(t, err, sealed)
	require.Equal(t, 1, calls)
	r, _, err := b.store.Open(ctx, "outputs/j/a.mp4")
	require.NoError(t, err)
	got, _ := io.ReadAll(r)
	require.NoError(t, r.Close())
	require.Equal(t, "committed", string(got))
	require.Equal(t, []string{"outputs/j/a.mp4"}, files(t, b.dir))

	_, err = b.store.PutIf(ctx, "outputs/j/a.mp4", &errAfter{n: 10, err: io.ErrUnexpectedEOF}, refuse)
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	require.Equal(t, 1, calls, "the guard ran for a body that never arrived whole")

	obj, err := b.store.PutIf(ctx, "outputs/j/a.mp4", strings.NewReader("replaced"), func(publish func() error) error {
		return publish()
	})
	require.NoError(t, err)
	require.Equal(t, hexSHA256([]byte("replaced")), obj.SHA256)

	_, err = b.store.PutIf(ctx, "outputs/j/b.mp4", strings.NewReader("x"), func(func() error) error { return nil })
	require.ErrorContains(t, err, "neither published nor refused")
	require.Equal(t, []string{"outputs/j/a.mp4"}, files(t, b.dir))
}

// TestFSCreateIsCreateOnlyUnderRaces: of concurrent Creates of one key
// exactly one publishes; the others get ErrExists and the key keeps the
// winner's bytes whole; no temporary file is left. Link then names the
// object under another key without copying it.
func TestFSCreateIsCreateOnlyUnderRaces(t *testing.T) {
	t.Parallel()
	b := setupFS(t)
	ctx := context.Background()
	key := UploadKey("buyer", "in_x")
	const writers = 8
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for i := range writers {
		wg.Go(func() {
			_, errs[i] = b.store.Create(ctx, key, bytes.NewReader(bytes.Repeat([]byte{byte('a' + i)}, 1<<16)))
		})
	}
	wg.Wait()
	won := -1
	for i, err := range errs {
		if err == nil {
			require.Equal(t, -1, won, "two creates published")
			won = i
			continue
		}
		require.ErrorIs(t, err, ErrExists)
	}
	require.NotEqual(t, -1, won, "no create published")
	want := bytes.Repeat([]byte{byte('a' + won)}, 1<<16)
	obj, err := Hash(ctx, b.store, key)
	require.NoError(t, err)
	require.Equal(t, hexSHA256(want), obj.SHA256)

	linked, err := b.store.Link(ctx, key, InputKey("job"))
	require.NoError(t, err)
	require.Equal(t, int64(len(want)), linked.Bytes)
	got, err := Hash(ctx, b.store, InputKey("job"))
	require.NoError(t, err)
	require.Equal(t, obj.SHA256, got.SHA256)
	_, err = b.store.Link(ctx, UploadKey("buyer", "none"), InputKey("job2"))
	require.ErrorIs(t, err, ErrNotFound)
	require.ElementsMatch(t, []string{"uploads/buyer/in_x", "inputs/job"}, files(t, b.dir))
}

// TestFSUnsyncedBehavesAlike: the harness's unsynced store skips fsyncs
// only; puts, the guard and the temporary files behave as NewFS's.
func TestFSUnsyncedBehavesAlike(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	st, err := NewFSUnsynced(dir)
	require.NoError(t, err)
	defer st.Close()
	ctx := context.Background()
	obj, err := st.Put(ctx, "outputs/j/a.mp4", strings.NewReader("committed"))
	require.NoError(t, err)
	require.Equal(t, hexSHA256([]byte("committed")), obj.SHA256)
	sealed := errors.New("sealed")
	_, err = st.PutIf(ctx, "outputs/j/a.mp4", strings.NewReader("late"), func(func() error) error { return sealed })
	require.ErrorIs(t, err, sealed)
	r, _, err := st.Open(ctx, "outputs/j/a.mp4")
	require.NoError(t, err)
	got, _ := io.ReadAll(r)
	require.NoError(t, r.Close())
	require.Equal(t, "committed", string(got))
	require.Equal(t, []string{"outputs/j/a.mp4"}, files(t, dir))
}
