package protocol

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func TestCleanFailMessage(t *testing.T) {
	t.Parallel()
	token := "tok_" + strings.Repeat("x", 40)
	for _, c := range []struct{ in, want string }{
		{"ffmpeg exited 1: Invalid data found", "ffmpeg exited 1: Invalid data found"},
		{"commit " + token + " refused", "commit [redacted] refused"},
		{"GET https://s3.example/b/inputs/j?X-Amz-Signature=abc&X-Amz-Credential=k: 403",
			"GET https://s3.example/b/inputs/j?[redacted] 403"}, // the query runs to the blank
		{"key rmk_AbC-12_x leaked, device rmd_q, operator rmo_z", "key [redacted] leaked, device [redacted], operator [redacted]"},
		{"Authorization: Bearer abc.def", "Authorization: Bearer [redacted]"},
		{"line one\nline\ttwo\x00", "line one line two"},
		{"bad \xff byte", "bad \uFFFD byte"},
	} {
		require.Equal(t, c.want, CleanFailMessage(c.in, token), "in: %q", c.in)
	}
	long := strings.Repeat("é", FailMessageMaxBytes) // two bytes each
	got := CleanFailMessage(long)
	require.LessOrEqual(t, len(got), FailMessageMaxBytes)
	require.True(t, utf8.ValidString(got), "cut inside a character")
	require.Equal(t, "short", CleanFailMessage("short", "", "abc"), "a short secret cuts nothing")
}
