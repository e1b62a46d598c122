package artifact

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestValidateKey(t *testing.T) {
	t.Parallel()
	valid := []string{
		"inputs/2b1f0c9e-6a4d-4c1e-9d8e-0f1a2b3c4d5e",
		"outputs/job/attempt.mp4",
		"a", "A.b_c-d", "..a/b..", ".hidden/x",
		strings.Repeat("a", MaxKeyLen),
	}
	for _, key := range valid {
		require.NoError(t, ValidateKey(key), "%q", key)
	}
	invalid := []struct{ key, why string }{
		{"", "empty"},
		{"/etc/passwd", "absolute path"},
		{"/", "absolute path"},
		{"..", `segment ".." is not allowed`},
		{"../secret", `segment ".." is not allowed`},
		{"outputs/../inputs/x", `segment ".." is not allowed`},
		{"outputs/..", `segment ".." is not allowed`},
		{"./a", `segment "." is not allowed`},
		{"a/./b", `segment "." is not allowed`},
		{"a//b", "empty segment"},
		{"a/", "empty segment"},
		{`a\b`, "contains a backslash"},
		{`..\..\etc`, "contains a backslash"},
		{`C:\x`, "contains a backslash"},
		{"a\x00b", "contains NUL"},
		{"C:", `segment "C:" contains ':'`},
		{"a b", `contains ' '`},
		{"a/b~c", `contains '~'`},
		{"caf\u00e9", "contains non-ASCII byte 0xc3"},
		{strings.Repeat("a", MaxKeyLen+1), "longer than 512 bytes"},
	}
	for _, tt := range invalid {
		err := ValidateKey(tt.key)
		require.ErrorIs(t, err, ErrInvalidKey, "%q", tt.key)
		require.ErrorContains(t, err, tt.why, "%q", tt.key)
	}
	// Hostile keys are shortened in messages.
	require.Less(t, len(ValidateKey(strings.Repeat("x", 10000)).Error()), 200)
}

func TestKeyHelpers(t *testing.T) {
	t.Parallel()
	require.Equal(t, "inputs/j1", InputKey("j1"))
	require.Equal(t, "outputs/j1/a1.mp4", OutputKey("j1", "a1"))
	require.NoError(t, ValidateKey(OutputKey("2b1f0c9e-6a4d-4c1e-9d8e-0f1a2b3c4d5e", "7c1f0c9e-6a4d-4c1e-9d8e-0f1a2b3c4d5e")))
	// A hostile id cannot smuggle a traversal through the helpers.
	require.ErrorIs(t, ValidateKey(InputKey("../x")), ErrInvalidKey)
	require.ErrorIs(t, ValidateKey(OutputKey("j", "../../inputs/j")), ErrInvalidKey)
}
