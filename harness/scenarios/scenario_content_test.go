package scenarios

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/internal/mp4"
)

// Each broken output the scenarios upload has exactly the defect its name
// says, and keeps the length arithmetic of an honest claim: the media
// check, not the size or digest, is what must refuse it.
func TestBrokenOutputsHaveTheirDefect(t *testing.T) {
	t.Parallel()
	valid := mp4.Synthetic(mp4.SyntheticParams{Seed: "attempt", MdatBytes: 2048})
	_, err := mp4.Check(bytes.NewReader(valid), int64(len(valid)))
	require.NoError(t, err)
	want := map[string]error{"nomoov": mp4.ErrMissingMoov, "notrack": mp4.ErrNoTracks, "truncated": mp4.ErrOverrun}
	require.Len(t, mp4Breaks, len(want))
	for word, defect := range want {
		out, what, err := breakOutput([]string{"other", word}, valid)
		require.NoError(t, err, word)
		require.NotEmpty(t, what, word)
		_, err = mp4.Check(bytes.NewReader(out), int64(len(out)))
		require.ErrorIs(t, err, defect, word)
		require.True(t, bytes.HasSuffix(valid, out[len(out)-2048:]), "%s keeps the mdat payload", word)
	}
	same, what, err := breakOutput([]string{"other"}, valid)
	require.NoError(t, err)
	require.Empty(t, what)
	require.Equal(t, valid, same)
}
