package mp4

import (
	"bytes"
	"io"
	"math"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSyntheticPassesCheck(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		params SyntheticParams
		want   Info
	}{
		{"zero value", SyntheticParams{}, Info{MajorBrand: "isom", MinorVersion: 0x200, Timescale: DefaultTimescale,
			Duration: DefaultTimescale, Boxes: 19, TopLevelBoxes: 3, Tracks: 1, MdatBoxes: 1, MdatBytes: DefaultMdatBytes}},
		{"with track", SyntheticParams{Seed: "job-1", Timescale: 30000, Duration: 90000, MdatBytes: 100, Track: true},
			Info{MajorBrand: "isom", MinorVersion: 0x200, Timescale: 30000, Duration: 90000,
				Boxes: 19, TopLevelBoxes: 3, Tracks: 1, MdatBoxes: 1, MdatBytes: 100}},
		{"64-bit duration", SyntheticParams{Duration: math.MaxUint32 + 1, Track: true, MdatBytes: 1},
			Info{MajorBrand: "isom", MinorVersion: 0x200, MvhdVersion: 1, Timescale: DefaultTimescale,
				Duration: math.MaxUint32 + 1, Boxes: 19, TopLevelBoxes: 3, Tracks: 1, MdatBoxes: 1, MdatBytes: 1}},
		{"clamped payload", SyntheticParams{MdatBytes: MaxSyntheticMdatBytes + 1},
			Info{MajorBrand: "isom", MinorVersion: 0x200, Timescale: DefaultTimescale, Duration: DefaultTimescale,
				Boxes: 19, TopLevelBoxes: 3, Tracks: 1, MdatBoxes: 1, MdatBytes: MaxSyntheticMdatBytes}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := Synthetic(tt.params)
			info, err := Check(bytes.NewReader(b), int64(len(b)))
			require.NoError(t, err)
			require.Equal(t, tt.want, info)
		})
	}
}

// TestSyntheticDeterministic pins that the same params give the same bytes (the
// agent's output digest depends on it) and that the seed actually matters.
func TestSyntheticDeterministic(t *testing.T) {
	t.Parallel()
	p := SyntheticParams{Seed: "attempt-7", MdatBytes: 1000, Track: true}
	a, b := Synthetic(p), Synthetic(p)
	require.Equal(t, a, b)
	p.Seed = "attempt-8"
	c := Synthetic(p)
	require.Len(t, c, len(a))
	require.NotEqual(t, a, c)
	// Only the mdat payload depends on the seed.
	require.Equal(t, a[:len(a)-1000], c[:len(c)-1000])
}

// FuzzSynthetic checks that every parameter combination yields a file Check
// accepts with the requested values.
func FuzzSynthetic(f *testing.F) {
	f.Add("", uint32(0), uint64(0), uint16(0), false)
	f.Add("seed", uint32(90000), uint64(math.MaxUint64), uint16(3), true)
	f.Fuzz(func(t *testing.T, seed string, timescale uint32, duration uint64, n uint16, track bool) {
		b := Synthetic(SyntheticParams{Seed: seed, Timescale: timescale, Duration: duration, MdatBytes: int(n), Track: track})
		info, err := Check(bytes.NewReader(b), int64(len(b)))
		require.NoError(t, err)
		require.Equal(t, 1, info.Tracks, "every synthetic file has its track, asked for or not")
		if timescale != 0 {
			require.Equal(t, timescale, info.Timescale)
		}
		if duration != 0 {
			require.Equal(t, duration, info.Duration)
		}
	})
}

// TestWriteSyntheticStreamsSyntheticsBytes: WriteSynthetic writes exactly
// Synthetic's bytes (chunk boundaries do not show in the payload), and past
// Synthetic's in-memory cap it writes a longer file that Check accepts.
func TestWriteSyntheticStreamsSyntheticsBytes(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 1, 33, 64 << 10, 64<<10 + 7, 3*(64<<10) + 33} {
		p := SyntheticParams{Seed: "stream", MdatBytes: n}
		var b bytes.Buffer
		written, err := WriteSynthetic(&b, p)
		require.NoError(t, err)
		require.Equal(t, Synthetic(p), b.Bytes(), "mdat %d", n)
		require.Equal(t, int64(b.Len()), written)
	}
	big := SyntheticParams{Seed: "big", MdatBytes: MaxSyntheticMdatBytes + 100}
	f, err := os.CreateTemp(t.TempDir(), "big-*.mp4")
	require.NoError(t, err)
	defer f.Close()
	written, err := WriteSynthetic(f, big)
	require.NoError(t, err)
	info, err := Check(f, written)
	require.NoError(t, err)
	require.Equal(t, int64(MaxSyntheticMdatBytes+100), info.MdatBytes)
	head := make([]byte, 4096)
	_, err = f.ReadAt(head, 0)
	require.NoError(t, err)
	require.NotEqual(t, Synthetic(big)[:4096], head, "Synthetic clamps; the streamed file's mdat header says its real size")

	_, err = WriteSynthetic(io.Discard, SyntheticParams{MdatBytes: MaxStreamedMdatBytes + 1})
	require.ErrorContains(t, err, "exceeds")
}
