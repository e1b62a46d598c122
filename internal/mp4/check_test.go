package mp4

import (
	"bytes"
	"errors"
	"io"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// Builders for hand-made inputs; box and fullBox come from synthetic.go.
var (
	testFtyp = box("ftyp", []byte("isom"), u32(0x200), []byte("isommp41"))
	testMdat = box("mdat", []byte("payload"))
)

// mvhdV0 is a complete version 0 mvhd with the given timescale and duration.
func mvhdV0(timescale, duration uint32) []byte {
	return fullBox("mvhd", 0, 0, make([]byte, 8), u32(timescale), u32(duration), make([]byte, 80))
}

func mvhdV1(timescale uint32, duration uint64) []byte {
	return fullBox("mvhd", 1, 0, make([]byte, 16), u32(timescale), u64(duration), make([]byte, 80))
}

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// testTrak is the smallest track Check counts: an empty trak box.
var testTrak = box("trak")

// header32 is a bare box header declaring size, for boxes whose size lies.
func header32(size uint32, typ string) []byte { return append(u32(size), typ...) }

func header64(size uint64, typ string) []byte {
	return cat(u32(1), []byte(typ), u64(size))
}

func nest(depth int) []byte {
	b := box("stbl")
	for range depth {
		b = box("trak", b)
	}
	return b
}

func TestCheckRejectsMalformed(t *testing.T) {
	t.Parallel()
	valid := cat(testFtyp, box("moov", mvhdV0(1000, 5000)), testMdat)
	mdatAt := int64(len(testFtyp) + len(box("moov", mvhdV0(1000, 5000))))
	tests := []struct {
		name string
		in   []byte
		want error
		msg  string // exact message when set
	}{
		{"empty", nil, ErrMissingFtyp, "mp4: missing ftyp box"},
		{"short header", []byte{0, 0, 0}, ErrTruncated,
			"mp4: box header at offset 0 is truncated: 3 bytes left in file, need 8"},
		{"moov first", cat(box("moov", mvhdV0(1, 1)), testFtyp, testMdat), ErrFtypNotFirst,
			`mp4: box "moov" at offset 0 is the first box; ftyp must come first`},
		{"ftyp only", testFtyp, ErrMissingMoov, "mp4: missing moov box"},
		{"no mvhd", cat(testFtyp, box("moov", box("trak")), testMdat), ErrMissingMvhd, ""},
		{"no mdat", cat(testFtyp, box("moov", mvhdV0(1000, 1), testTrak)), ErrMissingMdat, "mp4: missing mdat box"},
		{"no track", cat(testFtyp, box("moov", mvhdV0(1000, 1)), testMdat), ErrNoTracks, "mp4: no trak box in moov"},
		{"track outside moov", cat(testFtyp, box("moov", mvhdV0(1000, 1)), testTrak, testMdat), ErrNoTracks, ""},
		{"mdat only nested", cat(testFtyp, box("moov", mvhdV0(1000, 1), box("trak", testMdat))), ErrMissingMdat, ""},
		{"zero duration", cat(testFtyp, box("moov", mvhdV0(1000, 0)), testMdat), ErrZeroDuration, ""},
		{"zero duration v1", cat(testFtyp, box("moov", mvhdV1(1000, 0)), testMdat), ErrZeroDuration, ""},
		{"zero timescale", cat(testFtyp, box("moov", mvhdV0(0, 10)), testMdat), ErrZeroTimescale, ""},
		{"mvhd version 2", cat(testFtyp, box("moov", fullBox("mvhd", 2, 0, make([]byte, 120))), testMdat), ErrBadMvhd, ""},
		{"mvhd short v0", cat(testFtyp, box("moov", fullBox("mvhd", 0, 0, make([]byte, 20))), testMdat), ErrBadMvhd, ""},
		{"mvhd v1 with v0 length", cat(testFtyp, box("moov", fullBox("mvhd", 1, 0, make([]byte, 96))), testMdat), ErrBadMvhd, ""},
		{"mvhd no version", cat(testFtyp, box("moov", box("mvhd", []byte{0, 0})), testMdat), ErrBadMvhd, ""},
		{"ftyp too short", cat(box("ftyp", []byte("isom")), box("moov", mvhdV0(1, 1)), testMdat), ErrBadFtyp, ""},
		{"ftyp ragged brands", cat(box("ftyp", []byte("isom"), u32(0), []byte("mp")), box("moov", mvhdV0(1, 1)), testMdat), ErrBadFtyp, ""},
		{"size below header", cat(testFtyp, header32(4, "free")), ErrBoxTooSmall,
			`mp4: box "free" at offset 24 declares size 4, smaller than its 8-byte header`},
		{"largesize below header", cat(testFtyp, header64(8, "mdat")), ErrBoxTooSmall, ""},
		{"largesize beyond int64", cat(testFtyp, header64(math.MaxUint64, "mdat")), ErrOverrun, ""},
		{"largesize truncated", cat(testFtyp, u32(1), []byte("mdat"), []byte{0, 0}), ErrTruncated, ""},
		{"uuid below header", cat(testFtyp, header32(20, "uuid"), make([]byte, 12)), ErrBoxTooSmall, ""},
		{"mdat overruns file", cat(valid[:mdatAt], header32(1<<20, "mdat"), []byte("x")), ErrOverrun,
			`mp4: box "mdat" at offset 140 overruns file (size 1048576, 9 bytes available)`},
		{"child overruns moov", cat(testFtyp, box("moov", header32(200, "mvhd")), testMdat), ErrOverrun,
			`mp4: box "mvhd" at offset 32 overruns parent "moov" (size 200, 8 bytes available)`},
		{"trailing junk", cat(valid, []byte{1, 2, 3}), ErrTruncated, ""},
		{"junk in moov", cat(testFtyp, box("moov", mvhdV0(1, 1), []byte{0, 0}), testMdat), ErrTruncated, ""},
		{"duplicate ftyp", cat(testFtyp, testFtyp, box("moov", mvhdV0(1, 1)), testMdat), ErrDuplicateBox, ""},
		{"duplicate moov", cat(testFtyp, box("moov", mvhdV0(1, 1)), box("moov", mvhdV0(1, 1)), testMdat), ErrDuplicateBox, ""},
		{"duplicate mvhd", cat(testFtyp, box("moov", mvhdV0(1, 1), mvhdV0(1, 1)), testMdat), ErrDuplicateBox, ""},
		{"nested too deep", cat(testFtyp, box("moov", mvhdV0(1, 1), nest(MaxDepth)), testMdat), ErrTooDeep, ""},
		{"too many boxes", cat(testFtyp, bytes.Repeat(box("free"), MaxBoxes)), ErrTooManyBoxes, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Check(bytes.NewReader(tt.in), int64(len(tt.in)))
			require.ErrorIs(t, err, tt.want)
			require.ErrorIs(t, err, ErrInvalid, "every rejection must read as bad media")
			if tt.msg != "" {
				require.EqualError(t, err, tt.msg)
			}
		})
	}
}

func TestCheckAccepts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		in    []byte
		check func(t *testing.T, info Info)
	}{
		{"mvhd v0", cat(testFtyp, box("moov", mvhdV0(600, 1200), testTrak), testMdat), func(t *testing.T, info Info) {
			require.Equal(t, Info{MajorBrand: "isom", MinorVersion: 0x200, Timescale: 600, Duration: 1200,
				Boxes: 5, TopLevelBoxes: 3, Tracks: 1, MdatBoxes: 1, MdatBytes: 7}, info)
		}},
		{"mvhd v1", cat(testFtyp, box("moov", mvhdV1(90000, 1<<40), testTrak), testMdat), func(t *testing.T, info Info) {
			require.Equal(t, uint8(1), info.MvhdVersion)
			require.Equal(t, uint64(1<<40), info.Duration)
		}},
		{"mdat size zero runs to end", cat(testFtyp, box("moov", mvhdV0(1, 1), testTrak), header32(0, "mdat"), make([]byte, 100)),
			func(t *testing.T, info Info) { require.Equal(t, int64(100), info.MdatBytes) }},
		{"mdat largesize", cat(testFtyp, box("moov", mvhdV0(1, 1), testTrak), header64(16+5, "mdat"), make([]byte, 5)),
			func(t *testing.T, info Info) { require.Equal(t, int64(5), info.MdatBytes) }},
		{"free uuid and mdat first", cat(testFtyp, box("free"), testMdat, box("uuid", make([]byte, 16)), box("moov", box("udta", []byte{0, 0, 0, 0}), mvhdV0(1, 1), testTrak)),
			func(t *testing.T, info Info) { require.Equal(t, 5, info.TopLevelBoxes) }},
		{"max depth", cat(testFtyp, box("moov", mvhdV0(1, 1), nest(MaxDepth-1)), testMdat), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			info, err := Check(bytes.NewReader(tt.in), int64(len(tt.in)))
			require.NoError(t, err)
			if tt.check != nil {
				tt.check(t, info)
			}
		})
	}
}

// TestCheckShortReader covers a size that promises more than the reader holds: the
// object is truncated, which is bad media rather than an I/O failure.
func TestCheckShortReader(t *testing.T) {
	t.Parallel()
	in := Synthetic(SyntheticParams{})
	cut := len(testFtyp) + 30 // inside mvhd
	_, err := Check(bytes.NewReader(in[:cut]), int64(len(in)))
	require.ErrorIs(t, err, ErrTruncated)
}

type failingReaderAt struct{ err error }

func (f failingReaderAt) ReadAt([]byte, int64) (int, error) { return 0, f.err }

// TestCheckReaderError pins the distinction the verifier relies on: a read failure
// is passed through and does not look like bad media.
func TestCheckReaderError(t *testing.T) {
	t.Parallel()
	boom := errors.New("disk on fire")
	_, err := Check(failingReaderAt{boom}, 100)
	require.ErrorIs(t, err, boom)
	require.NotErrorIs(t, err, ErrInvalid)

	_, err = Check(failingReaderAt{io.EOF}, 100)
	require.ErrorIs(t, err, ErrTruncated)

	_, err = Check(bytes.NewReader(nil), -1)
	require.Error(t, err)
	require.NotErrorIs(t, err, ErrInvalid)
}
