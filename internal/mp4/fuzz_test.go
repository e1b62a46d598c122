package mp4

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzCheck feeds arbitrary bytes to Check. The seed corpus lives in
// testdata/fuzz/FuzzCheck (valid, truncated and mis-sized files); run it with
// `go test -fuzz=FuzzCheck ./internal/mp4`.
func FuzzCheck(f *testing.F) {
	f.Add(Synthetic(SyntheticParams{Seed: "fuzz", MdatBytes: 16, Track: true}))
	f.Add(cat(testFtyp, box("moov", mvhdV1(1, 1)), header64(16, "mdat")))
	f.Fuzz(func(t *testing.T, in []byte) {
		info, err := Check(bytes.NewReader(in), int64(len(in)))
		if err != nil {
			// A bytes.Reader never fails, so every rejection must be a media verdict
			// the verifier can act on, worded for a person.
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("rejection %v does not match ErrInvalid", err)
			}
			if !strings.HasPrefix(err.Error(), "mp4: ") {
				t.Fatalf("error %q lacks the package prefix", err)
			}
			return
		}
		switch {
		case len(info.MajorBrand) != 4:
			t.Fatalf("accepted without an ftyp brand: %+v", info)
		case info.Timescale == 0 || info.Duration == 0:
			t.Fatalf("accepted a zero timescale or duration: %+v", info)
		case info.MdatBoxes < 1 || info.MdatBytes < 0 || info.MdatBytes > int64(len(in)):
			t.Fatalf("accepted with inconsistent mdat accounting: %+v", info)
		case info.TopLevelBoxes < 3 || info.Boxes < 4 || info.Boxes > MaxBoxes:
			t.Fatalf("accepted with impossible box counts: %+v", info)
		case !bytes.HasPrefix(in[4:], []byte("ftyp")):
			t.Fatalf("accepted input whose first box is not ftyp")
		}
		// Check is a pure function of the bytes.
		again, err := Check(bytes.NewReader(in), int64(len(in)))
		if err != nil || again != info {
			t.Fatalf("second Check disagrees: %+v, %v", again, err)
		}
	})
}

// TestFuzzCorpusMeansWhatItSays keeps the seed corpus honest: files named valid_*
// must pass Check and every other file must be rejected, so the fuzzer starts
// from both sides of the boundary.
func TestFuzzCorpusMeansWhatItSays(t *testing.T) {
	t.Parallel()
	dir := filepath.Join("testdata", "fuzz", "FuzzCheck")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.NotEmpty(t, entries)
	for _, e := range entries {
		raw, err := os.ReadFile(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		body, ok := strings.CutPrefix(string(raw), "go test fuzz v1\n[]byte(")
		require.True(t, ok, e.Name())
		in, err := strconv.Unquote(strings.TrimSuffix(strings.TrimSpace(body), ")"))
		require.NoError(t, err, e.Name())
		_, err = Check(strings.NewReader(in), int64(len(in)))
		if strings.HasPrefix(e.Name(), "valid_") {
			require.NoError(t, err, e.Name())
		} else {
			require.ErrorIs(t, err, ErrInvalid, e.Name())
		}
	}
}
