package protocol

import (
	"bytes"
	"crypto/rand"
	"errors"
	"regexp"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/require"
)

var uuidV4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func TestUUIDFromKnownBytes(t *testing.T) {
	t.Parallel()
	require.Equal(t, "00000000-0000-4000-8000-000000000000", UUIDFrom(bytes.NewReader(make([]byte, 16))))
	require.Equal(t, "ffffffff-ffff-4fff-bfff-ffffffffffff", UUIDFrom(bytes.NewReader(bytes.Repeat([]byte{0xff}, 16))))
	in := []byte{0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff}
	require.Equal(t, "00112233-4455-4677-8899-aabbccddeeff", UUIDFrom(bytes.NewReader(in)))

	// Exactly 16 bytes are drawn.
	r := bytes.NewReader(make([]byte, 40))
	UUIDFrom(r)
	require.Equal(t, 24, r.Len())
}

func TestUUIDFromVersionAndVariant(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, src := range []struct {
		name string
		next func() string
	}{
		{"crypto", func() string { return UUIDFrom(rand.Reader) }},
		{"seeded", func() string { return UUIDFrom(seeded(3)) }},
	} {
		for i := 0; i < 500; i++ {
			id := src.next()
			require.Len(t, id, 36)
			require.Regexp(t, uuidV4, id, src.name)
			require.Equal(t, byte('4'), id[14], "version nibble")
			require.Contains(t, "89ab", string(id[19]), "variant nibble")
			require.True(t, ValidID(id), id)
			if src.name == "crypto" {
				require.False(t, seen[id], "repeated uuid")
				seen[id] = true
			}
		}
	}
}

func TestUUIDFromPanicsOnBrokenReader(t *testing.T) {
	t.Parallel()
	require.Panics(t, func() { UUIDFrom(iotest.ErrReader(errors.New("no entropy"))) })
	require.Panics(t, func() { UUIDFrom(bytes.NewReader(make([]byte, 15))) })
}

func TestRandomIDsReproducibleAndIndependent(t *testing.T) {
	t.Parallel()
	mk := func() RandomIDs { return RandomIDs{Jobs: seeded(1), Attempts: seeded(2), Tokens: seeded(3)} }
	a, b := mk(), mk()

	// a draws kinds interleaved, b draws them in blocks: each stream is its
	// own, so the order of kinds does not change what each kind yields.
	var aj, aa, at, ah []string
	for i := 0; i < 20; i++ {
		aj = append(aj, a.NewJobID())
		p, h, err := a.NewCommitToken()
		require.NoError(t, err)
		at, ah = append(at, p), append(ah, h)
		aa = append(aa, a.NewAttemptID())
	}
	var bj, ba, bt, bh []string
	for i := 0; i < 20; i++ {
		ba = append(ba, b.NewAttemptID())
	}
	for i := 0; i < 20; i++ {
		p, h, err := b.NewCommitToken()
		require.NoError(t, err)
		bt, bh = append(bt, p), append(bh, h)
	}
	for i := 0; i < 20; i++ {
		bj = append(bj, b.NewJobID())
	}
	require.Equal(t, aj, bj)
	require.Equal(t, aa, ba)
	require.Equal(t, at, bt)
	require.Equal(t, ah, bh)
	for i := range aj {
		require.True(t, ValidID(aj[i]))
		require.True(t, ValidID(aa[i]))
		require.Equal(t, HashCommitToken(at[i]), ah[i])
	}
	require.NotEqual(t, aj, aa, "job and attempt streams differ")

	var _ IDSource = RandomIDs{}
	prod := RandomIDs{Jobs: rand.Reader, Attempts: rand.Reader, Tokens: rand.Reader}
	require.True(t, ValidID(prod.NewJobID()))
	_, _, err := RandomIDs{Tokens: iotest.ErrReader(errors.New("x"))}.NewCommitToken()
	require.Error(t, err)
}

func TestValidID(t *testing.T) {
	t.Parallel()
	good := "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
	require.True(t, ValidID(good))
	require.True(t, ValidID("00000000-0000-0000-0000-000000000000"), "canonical form, any version")
	require.True(t, ValidID(strings.Repeat("f", 8)+"-ffff-ffff-ffff-"+strings.Repeat("f", 12)))

	for name, s := range map[string]string{
		"empty":            "",
		"uppercase":        strings.ToUpper(good),
		"one upper":        "0A1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d",
		"short":            good[:35],
		"long":             good + "0",
		"no dashes":        strings.ReplaceAll(good, "-", ""),
		"no dashes 36":     strings.ReplaceAll(good, "-", "") + "0000",
		"dash moved left":  "0a1b2c3-d4e5f-4a6b-8c7d-9e0f1a2b3c4d",
		"dash moved right": "0a1b2c3d4-e5f-4a6b-8c7d-9e0f1a2b3c4d",
		"dash at end":      "0a1b2c3d-4e5f-4a6b-8c7d9-e0f1a2b3c4d",
		"extra dash":       "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b-c4d",
		"underscores":      "0a1b2c3d_4e5f_4a6b_8c7d_9e0f1a2b3c4d",
		"non-hex":          "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4g",
		"braces":           "{0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c}",
		"urn":              "urn:uuid:" + good,
		"space":            " " + good[1:],
		"multibyte":        "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3cé",
	} {
		require.False(t, ValidID(s), "%s: %q", name, s)
	}
}
