package artifact

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rendermac/rendermac/internal/mp4"
	"github.com/rendermac/rendermac/internal/s3provider"
	"github.com/rendermac/rendermac/protocol"
	"github.com/rendermac/rendermac/server/grant"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if err := s3provider.Shutdown(); err != nil && code == 0 {
		code = 1
	}
	os.Exit(code)
}

// setupS3 returns an S3 store on a fresh bucket of the real versitygw
// server (s3provider); it fails, never skips, when there is none.
func setupS3(t *testing.T) *S3 {
	t.Helper()
	b := s3provider.MustBucket(t)
	st, err := NewS3(context.Background(), S3Config{Bucket: b.Name, Prefix: "farm/", Endpoint: b.Endpoint,
		PathStyle: true, Region: b.Region, AccessKey: b.AccessKey, SecretKey: b.SecretKey})
	require.NoError(t, err)
	require.NoError(t, st.Check(context.Background()))
	return st
}

func readAll(t *testing.T, st Store, key string) []byte {
	t.Helper()
	r, obj, err := st.Open(context.Background(), key)
	require.NoError(t, err)
	defer r.Close()
	got, err := io.ReadAll(r)
	require.NoError(t, err)
	require.Equal(t, obj.Bytes, int64(len(got)))
	return got
}

func TestParseS3URL(t *testing.T) {
	t.Parallel()
	cfg, err := ParseS3URL("s3://media/render-farm")
	require.NoError(t, err)
	require.Equal(t, S3Config{Bucket: "media", Prefix: "render-farm/"}, cfg)
	cfg, err = ParseS3URL("s3://media")
	require.NoError(t, err)
	require.Equal(t, S3Config{Bucket: "media"}, cfg)
	for _, bad := range []string{"/var/lib/rendermac", "s3://", "s3://b/../x", "s3://b/p?x=1", "https://b/p"} {
		_, err := ParseS3URL(bad)
		require.Error(t, err, bad)
	}
}

func TestS3RoundTripAndNotFound(t *testing.T) {
	t.Parallel()
	st := setupS3(t)
	ctx := context.Background()
	key := OutputKey("job", "attempt")
	content := []byte("hello, render")
	obj, err := st.Put(ctx, key, bytes.NewReader(content))
	require.NoError(t, err)
	require.Equal(t, Object{Key: key, Bytes: int64(len(content)), SHA256: hexSHA256(content)}, obj)
	require.Equal(t, content, readAll(t, st, key))
	r, _, err := st.Open(ctx, key)
	require.NoError(t, err)
	p := make([]byte, 6)
	n, err := r.ReadAt(p, 7)
	require.NoError(t, err)
	require.Equal(t, "render", string(p[:n]))
	n, err = r.ReadAt(make([]byte, 10), 10)
	require.Equal(t, 3, n)
	require.ErrorIs(t, err, io.EOF)
	require.NoError(t, r.Close())

	require.NoError(t, st.Delete(ctx, key))
	for _, err := range []error{st.Delete(ctx, key), func() error { _, err := st.Stat(ctx, key); return err }(),
		func() error { _, _, err := st.Open(ctx, key); return err }(), func() error { _, err := st.Copy(ctx, key, "inputs/x"); return err }()} {
		require.ErrorIs(t, err, ErrNotFound)
	}
	_, err = st.Put(ctx, "outputs/../x", strings.NewReader("x"))
	require.ErrorIs(t, err, ErrInvalidKey)
}

// TestS3PutIsAtomicAndBounded: a multipart upload (3 parts) lands whole; a
// failed one, single-part or multipart, leaves the previous object.
func TestS3PutIsAtomicAndBounded(t *testing.T) {
	t.Parallel()
	st := setupS3(t)
	ctx := context.Background()
	big := bytes.Repeat([]byte("0123456789abcdef"), (2*s3PartBytes+12345)/16)
	obj, err := st.Put(ctx, "inputs/j", bytes.NewReader(big))
	require.NoError(t, err)
	require.Equal(t, hexSHA256(big), obj.SHA256)
	require.Equal(t, big, readAll(t, st, "inputs/j"))

	drop := errors.New("connection reset")
	_, err = st.Put(ctx, "inputs/j", &errAfter{n: 3, err: drop})
	require.ErrorIs(t, err, drop)
	_, err = st.Put(ctx, "inputs/j", &errAfter{n: s3PartBytes + 10, err: drop})
	require.ErrorIs(t, err, drop)
	require.Equal(t, big, readAll(t, st, "inputs/j"), "a failed upload must leave the previous object whole")
}

func TestS3PutIfPublishesOnlyThroughTheGuard(t *testing.T) {
	t.Parallel()
	st := setupS3(t)
	ctx := context.Background()
	refuse := errors.New("sealed")
	_, err := st.PutIf(ctx, "outputs/j/a.mp4", strings.NewReader("late"), func(func() error) error { return refuse })
	require.ErrorIs(t, err, refuse)
	_, err = st.Stat(ctx, "outputs/j/a.mp4")
	require.ErrorIs(t, err, ErrNotFound)
	obj, err := st.PutIf(ctx, "outputs/j/a.mp4", strings.NewReader("ok"), func(publish func() error) error { return publish() })
	require.NoError(t, err)
	require.Equal(t, int64(2), obj.Bytes)
	require.Equal(t, "ok", string(readAll(t, st, "outputs/j/a.mp4")))
}

// latePut is an S3 store on which another writer PUTs `late` at the output
// key right after verification's snapshot: the late PUT of an agent whose
// grant is still valid, landing after the claim, mid-verification.
type latePut struct {
	*S3
	key   string
	late  []byte
	fired atomic.Bool
}

func (l *latePut) Copy(ctx context.Context, src, dst string) (Object, error) {
	obj, err := l.S3.Copy(ctx, src, dst)
	if err == nil && src == l.key && l.fired.CompareAndSwap(false, true) {
		_, err = l.S3.Put(ctx, l.key, bytes.NewReader(l.late))
	}
	return obj, err
}

// TestS3VerifySealsTheVerifiedBytes is invariant 8 on S3: the bytes at the
// served key are the verified ones even when a late PUT replaces the
// attempt's key during and after verification.
func TestS3VerifySealsTheVerifiedBytes(t *testing.T) {
	t.Parallel()
	st := setupS3(t)
	ctx := context.Background()
	good := mp4.Synthetic(mp4.SyntheticParams{Seed: "good", Track: true})
	other := mp4.Synthetic(mp4.SyntheticParams{Seed: "other", Track: true})
	require.NotEqual(t, good, other)
	key := OutputKey("job", "attempt")
	_, err := st.Put(ctx, key, bytes.NewReader(good))
	require.NoError(t, err)
	n, sum := int64(len(good)), hexSHA256(good)

	lp := &latePut{S3: st, key: key, late: other}
	require.NoError(t, Verify(ctx, lp, key, n, sum, MediaMP4))
	require.True(t, lp.fired.Load(), "the late PUT must have landed during verification")
	require.Equal(t, other, readAll(t, st, key), "the late PUT replaced the attempt's key")
	served := ServedKey(st, key)
	require.Equal(t, SealedKey(key), served)
	require.Equal(t, good, readAll(t, st, served), "the served key must hold the verified bytes")

	// A second verification (the sweeper's, after a lost decision) judges
	// the sealed copy, not the key the late PUT replaced.
	require.NoError(t, Verify(ctx, st, key, n, sum, MediaMP4))
	require.Equal(t, good, readAll(t, st, served))

	// Without a seal, the replaced key fails the claim: verification reads
	// what is there, never trusts the claim.
	key2 := OutputKey("job", "attempt2")
	_, err = st.Put(ctx, key2, bytes.NewReader(other))
	require.NoError(t, err)
	var ve *VerifyError
	require.ErrorAs(t, Verify(ctx, st, key2, n, sum, MediaMP4), &ve)
	_, err = st.Stat(ctx, SealedKey(key2))
	require.ErrorIs(t, err, ErrNotFound, "a failed verification seals nothing")

	// No snapshot is left behind, and a missing output is a verdict.
	require.ErrorAs(t, Verify(ctx, st, OutputKey("job", "none"), n, sum, MediaMP4), &ve)
	require.Equal(t, ReasonMissing, ve.Reason)
	_, err = st.Stat(ctx, "verifying/"+key)
	require.ErrorIs(t, err, ErrNotFound)
	require.False(t, Writable(served), "no grant may write the sealed key")
	require.True(t, Writable(key))
}

// patternReader yields n bytes of a repeating pattern without holding them.
type patternReader struct{ n, off int64 }

func (p *patternReader) Read(b []byte) (int, error) {
	if p.off >= p.n {
		return 0, io.EOF
	}
	k := int(min(int64(len(b)), p.n-p.off))
	for i := range k {
		b[i] = byte((p.off + int64(i)) % 251)
	}
	p.off += int64(k)
	return k, nil
}

func maxRSSKiB(t *testing.T) int64 {
	var ru syscall.Rusage
	require.NoError(t, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return int64(ru.Maxrss)
}

// TestS3VerifyStreams: an output uploaded with a presigned PUT (the agent's
// path) and verified (snapshot, streaming hash, seal) costs a small,
// size-independent amount of memory: allocations stay under 1/8 of the
// object and the peak RSS does not grow by the object's size. 64 MiB by
// default; RENDERMAC_S3_VERIFY_BYTES=1073741824 is the 1 GiB measurement.
// Not parallel: it reads the process's counters.
func TestS3VerifyStreams(t *testing.T) {
	size := int64(64 << 20)
	if v := os.Getenv("RENDERMAC_S3_VERIFY_BYTES"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		require.NoError(t, err)
		size = n
	}
	st := setupS3(t)
	ctx := context.Background()
	key := OutputKey("big", "attempt")
	h := sha256.New()
	_, err := io.Copy(h, &patternReader{n: size})
	require.NoError(t, err)
	sum := hex.EncodeToString(h.Sum(nil))
	runtime.GC()
	rss0 := maxRSSKiB(t)

	put, err := st.Presign(ctx, true, key, time.Hour)
	require.NoError(t, err)
	start := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, put, &patternReader{n: size})
	require.NoError(t, err)
	req.ContentLength = size
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	upload := time.Since(start)

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start = time.Now()
	require.NoError(t, Verify(ctx, st, key, size, sum, MediaNone))
	verify := time.Since(start)
	runtime.ReadMemStats(&after)
	alloc := after.TotalAlloc - before.TotalAlloc
	rssGrowth := maxRSSKiB(t) - rss0
	t.Logf("%d bytes: presigned PUT %v, verify+seal %v, verify allocated %d bytes, peak RSS grew %d KiB",
		size, upload.Round(time.Millisecond), verify.Round(time.Millisecond), alloc, rssGrowth)
	require.Less(t, alloc, uint64(size/8), "verification must stream, not buffer the object")
	require.Less(t, rssGrowth*1024, size/2, "the peak RSS must not follow the object's size")
	sealed, err := st.Stat(ctx, SealedKey(key))
	require.NoError(t, err)
	require.Equal(t, size, sealed.Bytes)
}

// TestS3PresignedGrantsOpenOneKey: a presigned PUT and GET move bytes with
// plain HTTP and no credentials; a tampered URL opens nothing.
func TestS3PresignedGrantsOpenOneKey(t *testing.T) {
	t.Parallel()
	st := setupS3(t)
	ctx := context.Background()
	key := OutputKey("job", "attempt")
	put, err := st.Presign(ctx, true, key, 60e9)
	require.NoError(t, err)
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, put, strings.NewReader("rendered"))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "video/mp4") // the agent sends it; it is not signed
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "rendered", string(readAll(t, st, key)))

	get, err := st.Presign(ctx, false, key, 60e9)
	require.NoError(t, err)
	resp, err = http.Get(get)
	require.NoError(t, err)
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "rendered", string(got))

	other := strings.Replace(get, "attempt.mp4", "other.mp4", 1)
	resp, err = http.Get(other)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusForbidden, resp.StatusCode, "a grant for one key opens no other")
}

// TestS3OutputGrantIsCreateOnly: an output put grant signs If-None-Match:
// *, so the bucket stores the key once: a PUT without the header is
// refused (it is signed), the first PUT with it lands, and every later one
// is 412 Precondition Failed with the first bytes kept. An input grant is
// a plain PUT (buyers' clients send no condition).
func TestS3OutputGrantIsCreateOnly(t *testing.T) {
	t.Parallel()
	st := setupS3(t)
	ctx := context.Background()
	put := func(url, body string, createOnly bool) int {
		t.Helper()
		return putGrant(t, url, []byte(body), createOnly)
	}
	key := OutputKey("job", "attempt")
	u, err := st.Grant(ctx, grant.Put, key, time.Time{}, time.Minute)
	require.NoError(t, err)
	require.Equal(t, http.StatusForbidden, put(u, "unconditional", false), "the condition is signed: a PUT without it is refused")
	require.Equal(t, http.StatusOK, put(u, "rendered", true))
	require.Equal(t, protocol.OutputPutRefusedStatus, put(u, "late bytes", true), "a second write of an output key")
	require.Equal(t, "rendered", string(readAll(t, st, key)))

	in := InputKey("job")
	u, err = st.Grant(ctx, grant.Put, in, time.Time{}, time.Minute)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, put(u, "first input", false))
	require.Equal(t, http.StatusOK, put(u, "second input", false))
	require.Equal(t, "second input", string(readAll(t, st, in)))
}

// TestS3UploadGrantIsCreateOnlyAndCopiesInParts: an uploaded input's put
// grant is create-only like an output's, and Copy of an object over the
// single-copy limit (lowered here to 5 MiB) copies it part by part.
func TestS3UploadGrantIsCreateOnlyAndCopiesInParts(t *testing.T) {
	t.Parallel()
	st := setupS3(t)
	st.copyPartBytes = 5 << 20
	ctx := context.Background()
	key := UploadKey("buyer", "in_x")
	u, err := st.Grant(ctx, grant.Put, key, time.Time{}, time.Minute)
	require.NoError(t, err)
	content := bytes.Repeat([]byte("0123456789abcdef"), (12<<20)/16+5) // 12 MiB and 80 bytes: three parts
	put := func(body []byte, createOnly bool) int {
		t.Helper()
		return putGrant(t, u, body, createOnly)
	}
	require.Equal(t, http.StatusForbidden, put([]byte("x"), false), "the condition is signed")
	require.Equal(t, http.StatusOK, put(content, true))
	require.Equal(t, protocol.OutputPutRefusedStatus, put([]byte("other"), true), "a second write of an upload")
	obj, err := st.Copy(ctx, key, InputKey("job"))
	require.NoError(t, err)
	require.Equal(t, int64(len(content)), obj.Bytes)
	sum := sha256.Sum256(content)
	got, err := Hash(ctx, st, InputKey("job"))
	require.NoError(t, err)
	require.Equal(t, hex.EncodeToString(sum[:]), got.SHA256)
}

// putGrant PUTs body to a presigned URL, with If-None-Match: * when
// createOnly, and returns the bucket's status.
func putGrant(t *testing.T, url string, body []byte, createOnly bool) int {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPut, url, bytes.NewReader(body))
	require.NoError(t, err)
	if createOnly {
		req.Header.Set(protocol.OutputPutCondition, protocol.OutputPutCreateOnly)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}
