package protocol

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"io"
	mrand "math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/require"
)

var (
	base64urlToken = regexp.MustCompile(`^[A-Za-z0-9_-]{32}$`)
	lowerHex64     = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func seeded(seed uint64) io.Reader {
	var s [32]byte
	s[0] = byte(seed)
	s[1] = byte(seed >> 8)
	return mrand.NewChaCha8(s)
}

func TestNewCommitTokenShape(t *testing.T) {
	t.Parallel()
	plain, hash, err := NewCommitToken(rand.Reader)
	require.NoError(t, err)
	require.Len(t, plain, 32)
	require.Regexp(t, base64urlToken, plain)
	require.NotContains(t, plain, "=")
	raw, err := base64.RawURLEncoding.DecodeString(plain)
	require.NoError(t, err)
	require.Len(t, raw, 24)

	require.Len(t, hash, 64)
	require.Regexp(t, lowerHex64, hash)
	require.Equal(t, sha256Hex(plain), hash, "hash is hex(sha256(plaintext string))")
	require.NotEqual(t, plain, hash)
	require.Equal(t, hash, HashCommitToken(plain))
	require.True(t, ValidTokenHash(hash))
	require.True(t, VerifyCommitToken(plain, hash))
}

func TestNewCommitTokenDistinct(t *testing.T) {
	t.Parallel()
	plains := map[string]bool{}
	hashes := map[string]bool{}
	for i := 0; i < 1000; i++ {
		p, h, err := NewCommitToken(rand.Reader)
		require.NoError(t, err)
		require.False(t, plains[p], "repeated plaintext at draw %d", i)
		require.False(t, hashes[h], "repeated hash at draw %d", i)
		plains[p] = true
		hashes[h] = true
	}
	require.Len(t, plains, 1000)
	require.Len(t, hashes, 1000)
}

func TestNewCommitTokenReaderFailure(t *testing.T) {
	t.Parallel()
	boom := errors.New("entropy gone")
	for name, r := range map[string]io.Reader{
		"error":  iotest.ErrReader(boom),
		"short":  bytes.NewReader(make([]byte, CommitTokenBytes-1)),
		"empty":  bytes.NewReader(nil),
		"middle": io.MultiReader(bytes.NewReader(make([]byte, 10)), iotest.ErrReader(boom)),
	} {
		p, h, err := NewCommitToken(r)
		require.Error(t, err, name)
		require.Empty(t, p, name)
		require.Empty(t, h, name)
		if name == "error" || name == "middle" {
			require.ErrorIs(t, err, boom, name)
		}
	}
	// A reader that hands out one byte at a time is still a full draw.
	p, h, err := NewCommitToken(iotest.OneByteReader(bytes.NewReader(make([]byte, CommitTokenBytes))))
	require.NoError(t, err)
	require.Equal(t, strings.Repeat("A", 32), p)
	require.Equal(t, sha256Hex(p), h)
}

func TestNewCommitTokenKnownBytes(t *testing.T) {
	t.Parallel()
	p, h, err := NewCommitToken(bytes.NewReader(make([]byte, CommitTokenBytes)))
	require.NoError(t, err)
	require.Equal(t, strings.Repeat("A", 32), p)
	require.Equal(t, sha256Hex(strings.Repeat("A", 32)), h)

	// All-ones bytes exercise the URL-safe alphabet ('_' rather than '/').
	p, h, err = NewCommitToken(bytes.NewReader(bytes.Repeat([]byte{0xff}, CommitTokenBytes)))
	require.NoError(t, err)
	require.Equal(t, strings.Repeat("_", 32), p)
	require.Equal(t, sha256Hex(p), h)

	// 0xfb 0xef 0xbe encodes to "++++" in std base64 and "----" in base64url.
	p, _, err = NewCommitToken(bytes.NewReader(bytes.Repeat([]byte{0xfb, 0xef, 0xbe}, CommitTokenBytes/3)))
	require.NoError(t, err)
	require.Equal(t, strings.Repeat("-", 32), p)

	// Only the first 24 bytes are drawn.
	r := bytes.NewReader(make([]byte, 100))
	_, _, err = NewCommitToken(r)
	require.NoError(t, err)
	require.Equal(t, 100-CommitTokenBytes, r.Len())
}

func TestNewCommitTokenSeededReproducible(t *testing.T) {
	t.Parallel()
	a, b, c := seeded(7), seeded(7), seeded(8)
	var fromA, fromC []string
	for i := 0; i < 50; i++ {
		pa, ha, err := NewCommitToken(a)
		require.NoError(t, err)
		pb, hb, err := NewCommitToken(b)
		require.NoError(t, err)
		require.Equal(t, pa, pb, "draw %d", i)
		require.Equal(t, ha, hb, "draw %d", i)
		pc, _, err := NewCommitToken(c)
		require.NoError(t, err)
		fromA = append(fromA, pa)
		fromC = append(fromC, pc)
	}
	require.NotEqual(t, fromA, fromC, "different seeds give different tokens")
}

func TestVerifyCommitToken(t *testing.T) {
	t.Parallel()
	plain, hash, err := NewCommitToken(rand.Reader)
	require.NoError(t, err)
	other, otherHash, err := NewCommitToken(rand.Reader)
	require.NoError(t, err)

	require.True(t, VerifyCommitToken(plain, hash))
	require.True(t, VerifyCommitToken(other, otherHash))

	require.False(t, VerifyCommitToken(other, hash), "wrong plaintext")
	require.False(t, VerifyCommitToken(plain, otherHash), "another attempt's hash")
	require.False(t, VerifyCommitToken("", hash), "empty plaintext")
	require.False(t, VerifyCommitToken(plain[:31], hash), "truncated plaintext")
	require.False(t, VerifyCommitToken(plain+"A", hash), "extended plaintext")
	require.False(t, VerifyCommitToken(" "+plain, hash), "padded plaintext")
	require.False(t, VerifyCommitToken(hash, hash), "the hash is not the secret")
	require.False(t, VerifyCommitToken(plain, plain), "plaintext stored in place of the hash")

	require.False(t, VerifyCommitToken(plain, strings.ToUpper(hash)), "upper-case hash")
	require.False(t, VerifyCommitToken(plain, hash[:63]), "short hash")
	require.False(t, VerifyCommitToken(plain, hash+"0"), "long hash")
	require.False(t, VerifyCommitToken(plain, ""), "empty hash")
	require.False(t, VerifyCommitToken(plain, hash[:32]), "half hash")

	// A one-character flip anywhere in plaintext or hash is refused.
	for i := range plain {
		b := []byte(plain)
		if b[i] == 'A' {
			b[i] = 'B'
		} else {
			b[i] = 'A'
		}
		require.False(t, VerifyCommitToken(string(b), hash), "plaintext flip at %d", i)
	}
	for i := range hash {
		b := []byte(hash)
		if b[i] == '0' {
			b[i] = '1'
		} else {
			b[i] = '0'
		}
		require.False(t, VerifyCommitToken(plain, string(b)), "hash flip at %d", i)
	}
}

func TestValidTokenHash(t *testing.T) {
	t.Parallel()
	good := sha256Hex("x")
	for name, c := range map[string]struct {
		h    string
		want bool
	}{
		"real":          {good, true},
		"zeros":         {strings.Repeat("0", 64), true},
		"all hex":       {strings.Repeat("0123456789abcdef", 4), true},
		"empty":         {"", false},
		"63":            {good[:63], false},
		"65":            {good + "a", false},
		"128":           {good + good, false},
		"upper":         {strings.Repeat("A", 64), false},
		"mixed case":    {"A" + good[1:], false},
		"non-hex g":     {"g" + good[1:], false},
		"space":         {" " + good[1:], false},
		"trailing nl":   {good[:63] + "\n", false},
		"0x prefix":     {"0x" + good[2:], false},
		"base64":        {strings.Repeat("A", 32), false},
		"multibyte 64B": {strings.Repeat("é", 32), false},
		"NUL":           {strings.Repeat("\x00", 64), false},
		"dash":          {good[:32] + "-" + good[33:], false},
	} {
		require.Equal(t, c.want, ValidTokenHash(c.h), name)
	}
}
