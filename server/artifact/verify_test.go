package artifact

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/rendermac/rendermac/internal/mp4"
	"github.com/stretchr/testify/require"
)

func TestVerifyReasons(t *testing.T) {
	t.Parallel()
	b := setupFS(t)
	ctx := context.Background()
	good := mp4.Synthetic(mp4.SyntheticParams{Seed: "job/attempt", Track: true})
	bad := []byte("definitely not an mp4 file")
	key := OutputKey("job", "attempt")
	_, err := b.store.Put(ctx, key, bytes.NewReader(good))
	require.NoError(t, err)
	_, err = b.store.Put(ctx, "outputs/job/bad.mp4", bytes.NewReader(bad))
	require.NoError(t, err)

	n, sum := int64(len(good)), hexSHA256(good)
	tests := []struct {
		name   string
		key    string
		bytes  int64
		sha256 string
		media  string
		reason string // "" means Verify passes
		cause  error
	}{
		{"ok mp4", key, n, sum, MediaMP4, "", nil},
		{"ok no media check", "outputs/job/bad.mp4", int64(len(bad)), hexSHA256(bad), MediaNone, "", nil},
		{"missing", OutputKey("job", "other"), n, sum, MediaMP4, ReasonMissing, ErrNotFound},
		{"invalid key", "outputs/../inputs/job", n, sum, MediaMP4, ReasonInvalidKey, ErrInvalidKey},
		{"size short", key, n - 1, sum, MediaMP4, ReasonSizeMismatch, nil},
		{"size long", key, n + 1, sum, MediaMP4, ReasonSizeMismatch, nil},
		{"sha256 differs", key, n, hexSHA256(bad), MediaMP4, ReasonSHA256Mismatch, nil},
		{"sha256 uppercase", key, n, strings.ToUpper(sum), MediaMP4, ReasonSHA256Mismatch, nil},
		{"sha256 short", key, n, sum[:63], MediaMP4, ReasonSHA256Mismatch, nil},
		{"media invalid", "outputs/job/bad.mp4", int64(len(bad)), hexSHA256(bad), MediaMP4, ReasonMediaInvalid, mp4.ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := Verify(ctx, b.store, tt.key, tt.bytes, tt.sha256, tt.media)
			if tt.reason == "" {
				require.NoError(t, err)
				return
			}
			var ve *VerifyError
			require.ErrorAs(t, err, &ve)
			require.Equal(t, tt.reason, ve.Reason, err.Error())
			require.Equal(t, tt.key, ve.Key)
			require.NotEmpty(t, ve.Message)
			require.Contains(t, err.Error(), tt.reason)
			if tt.cause != nil {
				require.ErrorIs(t, err, tt.cause)
			}
		})
	}
}

func TestVerifyMediaMessageNamesTheDefect(t *testing.T) {
	t.Parallel()
	b := setupFS(t)
	ctx := context.Background()
	full := mp4.Synthetic(mp4.SyntheticParams{})
	cut := full[:len(full)-10] // mdat now overruns the file
	_, err := b.store.Put(ctx, "outputs/j/a.mp4", bytes.NewReader(cut))
	require.NoError(t, err)
	err = Verify(ctx, b.store, "outputs/j/a.mp4", int64(len(cut)), hexSHA256(cut), MediaMP4)
	require.ErrorIs(t, err, mp4.ErrOverrun)
	require.ErrorContains(t, err, `media_invalid: mp4: box "mdat" at offset`)
}

// flakyStore fails like an unreachable object store.
type flakyStore struct {
	Store
	openErr error
	readErr error
	below   int
}

func (f flakyStore) Open(ctx context.Context, key string) (Reader, Object, error) {
	if f.openErr != nil {
		return nil, Object{}, f.openErr
	}
	r, obj, err := f.Store.Open(ctx, key)
	if err != nil {
		return nil, Object{}, err
	}
	return failingReader{Reader: r, err: f.readErr, below: f.below}, obj, nil
}

// failingReader fails reads no larger than below (all reads when below is 0,
// only mp4.Check's small header reads otherwise; hashing reads 32 KiB).
type failingReader struct {
	Reader
	err   error
	below int
}

func (f failingReader) ReadAt(p []byte, off int64) (int, error) {
	if f.below == 0 || len(p) < f.below {
		return 0, f.err
	}
	return f.Reader.ReadAt(p, off)
}

// TestVerifyStoreFailureIsNotAVerdict pins the rule the commit path depends on:
// an outage must leave the job verifying, never fail it.
func TestVerifyStoreFailureIsNotAVerdict(t *testing.T) {
	t.Parallel()
	b := setupFS(t)
	ctx := context.Background()
	good := mp4.Synthetic(mp4.SyntheticParams{})
	key := OutputKey("j", "a")
	_, err := b.store.Put(ctx, key, bytes.NewReader(good))
	require.NoError(t, err)
	outage := errors.New("store unreachable")
	n, sum := int64(len(good)), hexSHA256(good)

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	cases := map[string]error{
		"open fails":       Verify(ctx, flakyStore{Store: b.store, openErr: outage}, key, n, sum, MediaMP4),
		"read fails":       Verify(ctx, flakyStore{Store: b.store, readErr: outage}, key, n, sum, MediaMP4),
		"media read fails": Verify(ctx, flakyStore{Store: b.store, readErr: outage, below: 1024}, key, n, sum, MediaMP4),
		"cancelled":        Verify(cancelled, b.store, key, n, sum, MediaMP4),
		"bad media":        Verify(ctx, b.store, key, n, sum, "webm"),
	}
	for name, err := range cases {
		require.Error(t, err, name)
		var ve *VerifyError
		require.False(t, errors.As(err, &ve), "%s: %v must not be a verdict", name, err)
	}
	require.ErrorIs(t, cases["open fails"], outage)
	require.ErrorIs(t, cases["read fails"], outage)
	require.ErrorIs(t, cases["media read fails"], outage)
	require.ErrorContains(t, cases["media read fails"], "media check")
	require.ErrorIs(t, cases["cancelled"], context.Canceled)
	require.ErrorIs(t, cases["bad media"], ErrUnknownMedia)
}
