package mp4

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"math"
)

// Defaults and limits for Synthetic.
const (
	// DefaultTimescale is used when SyntheticParams.Timescale is 0.
	DefaultTimescale = 1000
	// DefaultMdatBytes is used when SyntheticParams.MdatBytes is 0 or less.
	DefaultMdatBytes = 4096
	// MaxSyntheticMdatBytes caps the mdat payload, because the parameters may come
	// from a buyer's job and the whole file is built in memory.
	MaxSyntheticMdatBytes = 64 << 20
)

// SyntheticParams describes a file for Synthetic. The zero value is usable: it
// yields a one-second file with DefaultMdatBytes of payload derived from "".
type SyntheticParams struct {
	// Seed determines the mdat payload; equal seeds give equal bytes.
	Seed string
	// Timescale is mvhd's units per second; 0 means DefaultTimescale.
	Timescale uint32
	// Duration is in Timescale units; 0 means one second. Durations above
	// math.MaxUint32 switch mvhd (and the track's headers) to version 1.
	Duration uint64
	// MdatBytes is the mdat payload length; 0 or less means DefaultMdatBytes, and
	// values above MaxSyntheticMdatBytes are clamped to it.
	MdatBytes int
	// Track is ignored: every synthetic file has its one minimal video trak,
	// because Check requires a track. It stays for the callers that ask for it.
	Track bool
}

// Synthetic builds a structurally valid MP4: ftyp (isom), moov with mvhd and one
// minimal video trak (tkhd, mdia with mdhd, hdlr and an empty sample table, so
// that the file also looks like media to stricter tools), then mdat. The output
// is a pure function of params (all timestamps are zero), so two agents, or an
// agent and a test, produce identical bytes and digests. Check accepts every
// output.
func Synthetic(params SyntheticParams) []byte {
	p := params
	switch {
	case p.MdatBytes <= 0:
		p.MdatBytes = DefaultMdatBytes
	case p.MdatBytes > MaxSyntheticMdatBytes:
		p.MdatBytes = MaxSyntheticMdatBytes
	}
	head := syntheticHead(p)
	return appendSeeded(head, p.Seed, 0, p.MdatBytes)
}

// MaxStreamedMdatBytes is the largest payload WriteSynthetic writes: mdat's
// 32-bit size field (header included) bounds it.
const MaxStreamedMdatBytes = math.MaxUint32 - 8

// WriteSynthetic writes the file Synthetic builds for params to w, holding
// at most one 64 KiB chunk of it, so the payload may exceed
// MaxSyntheticMdatBytes (up to MaxStreamedMdatBytes; it is not clamped).
// For a payload Synthetic does not clamp it writes exactly Synthetic's
// bytes. It returns the bytes written.
func WriteSynthetic(w io.Writer, params SyntheticParams) (int64, error) {
	p := params
	switch {
	case p.MdatBytes <= 0:
		p.MdatBytes = DefaultMdatBytes
	case p.MdatBytes > MaxStreamedMdatBytes:
		return 0, fmt.Errorf("mp4: synthetic mdat of %d bytes exceeds %d", p.MdatBytes, MaxStreamedMdatBytes)
	}
	n, err := w.Write(syntheticHead(p))
	total := int64(n)
	if err != nil {
		return total, err
	}
	const chunk = 64 << 10 // a multiple of sha256.Size, so the counter runs on across chunks
	buf := make([]byte, 0, chunk)
	for off := 0; off < p.MdatBytes; off += chunk {
		buf = appendSeeded(buf[:0], p.Seed, uint64(off/sha256.Size), min(chunk, p.MdatBytes-off))
		n, err := w.Write(buf)
		total += int64(n)
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// syntheticHead is the file up to mdat's payload: ftyp, moov and mdat's
// header, for p's (normalized) MdatBytes.
func syntheticHead(p SyntheticParams) []byte {
	if p.Timescale == 0 {
		p.Timescale = DefaultTimescale
	}
	if p.Duration == 0 {
		p.Duration = uint64(p.Timescale)
	}
	var version byte
	if p.Duration > math.MaxUint32 {
		version = 1
	}

	ftyp := box("ftyp", []byte("isom"), u32(0x200), []byte("isomiso2mp41"))
	const nextTrack = 2 // the one trak is track 1
	trak := synthTrak(version, p.Timescale, p.Duration)
	mvhd := fullBox("mvhd", version, 0,
		times(version, 0, 0), u32(p.Timescale), dur(version, p.Duration),
		u32(0x00010000), u16(0x0100), make([]byte, 10), // rate 1.0, volume 1.0, reserved
		unityMatrix(), make([]byte, 24), u32(nextTrack))
	moov := box("moov", mvhd, trak)

	out := make([]byte, 0, len(ftyp)+len(moov)+8+min(p.MdatBytes, MaxSyntheticMdatBytes))
	out = append(out, ftyp...)
	out = append(out, moov...)
	out = binary.BigEndian.AppendUint32(out, uint32(8+p.MdatBytes))
	return append(out, "mdat"...)
}

// synthTrak is a video track with no samples: enough for the box walk and for
// tools that expect tkhd/mdhd/hdlr, without pretending to carry decodable frames.
func synthTrak(version byte, timescale uint32, duration uint64) []byte {
	tkhd := fullBox("tkhd", version, 0x3, // enabled | in movie
		times(version, 0, 0), u32(1), u32(0), dur(version, duration),
		make([]byte, 8), u16(0), u16(0), u16(0), u16(0), // reserved, layer, group, volume, reserved
		unityMatrix(), u32(16<<16), u32(16<<16)) // 16x16 in 16.16 fixed point
	mdhd := fullBox("mdhd", version, 0,
		times(version, 0, 0), u32(timescale), dur(version, duration),
		u16(0x55c4), u16(0)) // language "und"
	hdlr := fullBox("hdlr", 0, 0, u32(0), []byte("vide"), make([]byte, 12),
		[]byte("RenderMac synthetic\x00"))
	vmhd := fullBox("vmhd", 0, 1, u16(0), make([]byte, 6))
	dinf := box("dinf", fullBox("dref", 0, 0, u32(1), fullBox("url ", 0, 1)))
	stbl := box("stbl",
		fullBox("stsd", 0, 0, u32(0)), fullBox("stts", 0, 0, u32(0)),
		fullBox("stsc", 0, 0, u32(0)), fullBox("stsz", 0, 0, u32(0), u32(0)),
		fullBox("stco", 0, 0, u32(0)))
	return box("trak", tkhd, box("mdia", mdhd, hdlr, box("minf", vmhd, dinf, stbl)))
}

// appendSeeded appends n bytes of SHA-256 in counter mode over seed, from
// block counter on: stable across
// Go versions and platforms, unlike math/rand streams.
func appendSeeded(out []byte, seed string, counter uint64, n int) []byte {
	block := make([]byte, 0, len(seed)+9)
	block = append(block, seed...)
	block = append(block, 0) // separates the seed from the counter
	for n > 0 {
		sum := sha256.Sum256(binary.BigEndian.AppendUint64(block, counter))
		k := min(n, len(sum))
		out = append(out, sum[:k]...)
		n -= k
		counter++
	}
	return out
}

// box frames parts as one box with a 32-bit size; synthetic boxes are small
// except mdat, which Synthetic frames itself.
func box(typ string, parts ...[]byte) []byte {
	n := 8
	for _, p := range parts {
		n += len(p)
	}
	out := make([]byte, 0, n)
	out = binary.BigEndian.AppendUint32(out, uint32(n))
	out = append(out, typ...)
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// fullBox is a box whose payload starts with a version byte and 24-bit flags.
func fullBox(typ string, version byte, flags uint32, parts ...[]byte) []byte {
	vf := u32(uint32(version)<<24 | flags&0xffffff)
	return box(typ, append([][]byte{vf}, parts...)...)
}

// times encodes creation and modification times in the version's width.
func times(version byte, creation, modification uint64) []byte {
	if version == 1 {
		return append(u64(creation), u64(modification)...)
	}
	return append(u32(uint32(creation)), u32(uint32(modification))...)
}

// dur encodes a duration in the version's width; callers pick version 1 whenever
// the duration does not fit 32 bits, so the truncation never loses information.
func dur(version byte, d uint64) []byte {
	if version == 1 {
		return u64(d)
	}
	return u32(uint32(d))
}

func unityMatrix() []byte {
	var m []byte
	for _, v := range []uint32{0x00010000, 0, 0, 0, 0x00010000, 0, 0, 0, 0x40000000} {
		m = binary.BigEndian.AppendUint32(m, v)
	}
	return m
}

func u16(v uint16) []byte { return binary.BigEndian.AppendUint16(nil, v) }
func u32(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }
func u64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }
