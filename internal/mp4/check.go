package mp4

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// Limits that keep Check's work bounded on hostile input.
const (
	// MaxDepth is how many levels below the top level a box may sit. Real files
	// need five (moov/trak/mdia/minf/stbl/stsd); the slack tolerates unusual muxers.
	MaxDepth = 16
	// MaxBoxes bounds how many box headers one Check reads, so a file made of
	// millions of empty boxes costs bounded work. Fragmented files with thousands
	// of moof/mdat pairs stay well below it.
	MaxBoxes = 100_000
)

// Info describes a file Check accepted. Every accepted file has a four-character
// MajorBrand, Timescale > 0, Duration > 0, at least one track and at least one mdat.
type Info struct {
	// MajorBrand is ftyp's major brand, e.g. "isom".
	MajorBrand string
	// MinorVersion is ftyp's minor version.
	MinorVersion uint32
	// MvhdVersion is 0 (32-bit times) or 1 (64-bit times).
	MvhdVersion uint8
	// Timescale is mvhd's units per second.
	Timescale uint32
	// Duration is mvhd's duration in Timescale units.
	Duration uint64
	// Boxes counts every box walked, at any depth.
	Boxes int
	// TopLevelBoxes counts the boxes directly in the file.
	TopLevelBoxes int
	// Tracks counts trak boxes in moov.
	Tracks int
	// MdatBoxes counts top-level mdat boxes.
	MdatBoxes int
	// MdatBytes sums the payload bytes of those mdat boxes.
	MdatBytes int64
}

// containers are boxes whose payload is only child boxes. Check descends into them
// so that their children's sizes are checked too. Anything else (udta, meta, stsd,
// ...) may carry non-box data in some muxers' output and is skipped as opaque.
var containers = map[string]bool{
	"trak": true, "edts": true, "mdia": true, "minf": true, "dinf": true,
	"stbl": true, "mvex": true, "moof": true, "traf": true, "mfra": true,
}

// header is one parsed box header; size includes the header.
type header struct {
	typ    string
	off    int64
	hdrLen int64
	size   int64
}

type walker struct {
	r                io.ReaderAt
	info             Info
	ftyp, moov, mvhd bool
}

// Check walks the ISO-BMFF box tree of the size bytes readable from r and reports
// what it found. It accepts the input only if the first box is ftyp, a single
// top-level moov holds a single mvhd with timescale > 0 and duration > 0 and at
// least one trak (a movie of no track is no media, however well formed), a
// top-level mdat exists, and every box lies within its parent and the file.
//
// Rejections match ErrInvalid and usually a more specific sentinel; a *BoxError
// names the offending box and offset. Any other error came from r. Check never
// panics, and its memory use does not grow with any size the input declares.
func Check(r io.ReaderAt, size int64) (Info, error) {
	if size < 0 {
		return Info{}, fmt.Errorf("mp4: negative input size %d", size)
	}
	w := &walker{r: r}
	if err := w.walk(0, size, 0, ""); err != nil {
		return Info{}, err
	}
	switch {
	case !w.ftyp:
		return Info{}, ErrMissingFtyp
	case !w.moov:
		return Info{}, ErrMissingMoov
	case !w.mvhd:
		return Info{}, ErrMissingMvhd
	case w.info.Tracks == 0:
		return Info{}, ErrNoTracks
	case w.info.MdatBoxes == 0:
		return Info{}, ErrMissingMdat
	}
	return w.info, nil
}

// walk visits the boxes tiling [start, end); parent is "" for the file itself.
func (w *walker) walk(start, end int64, depth int, parent string) error {
	for off := start; off < end; {
		if w.info.Boxes >= MaxBoxes {
			return &BoxError{Offset: off, Kind: ErrTooManyBoxes,
				Detail: fmt.Sprintf("exceeds the limit of %d boxes", MaxBoxes)}
		}
		h, err := w.header(off, end, parent)
		if err != nil {
			return err
		}
		w.info.Boxes++
		if err := w.visit(h, depth, parent); err != nil {
			return err
		}
		off += h.size // h.size <= end-off, so this cannot overflow
	}
	return nil
}

func (w *walker) visit(h header, depth int, parent string) error {
	if depth > MaxDepth { // only containers descend, so this bounds the recursion
		return &BoxError{Type: h.typ, Offset: h.off, Kind: ErrTooDeep,
			Detail: fmt.Sprintf("is nested deeper than %d levels", MaxDepth)}
	}
	if depth == 0 {
		w.info.TopLevelBoxes++
		if w.info.TopLevelBoxes == 1 && h.typ != "ftyp" {
			return &BoxError{Type: h.typ, Offset: h.off, Kind: ErrFtypNotFirst,
				Detail: "is the first box; ftyp must come first"}
		}
	}
	switch {
	case depth == 0 && h.typ == "ftyp":
		if err := w.once(&w.ftyp, h); err != nil {
			return err
		}
		return w.parseFtyp(h)
	case depth == 0 && h.typ == "moov":
		if err := w.once(&w.moov, h); err != nil {
			return err
		}
		return w.walk(h.off+h.hdrLen, h.off+h.size, 1, h.typ)
	case depth == 0 && h.typ == "mdat":
		w.info.MdatBoxes++
		w.info.MdatBytes += h.size - h.hdrLen
	case depth == 1 && parent == "moov" && h.typ == "mvhd":
		if err := w.once(&w.mvhd, h); err != nil {
			return err
		}
		return w.parseMvhd(h)
	case containers[h.typ]:
		if depth == 1 && parent == "moov" && h.typ == "trak" {
			w.info.Tracks++
		}
		return w.walk(h.off+h.hdrLen, h.off+h.size, depth+1, h.typ)
	}
	return nil
}

// once marks a must-be-unique box as seen; a second one makes the file ambiguous.
func (w *walker) once(seen *bool, h header) error {
	if *seen {
		return &BoxError{Type: h.typ, Offset: h.off, Kind: ErrDuplicateBox,
			Detail: "is a duplicate; only one is allowed"}
	}
	*seen = true
	return nil
}

// header reads and bounds-checks the box header at off within [off, end).
func (w *walker) header(off, end int64, parent string) (header, error) {
	var buf [16]byte
	if end-off < 8 {
		return header{}, &BoxError{Offset: off, Kind: ErrTruncated,
			Detail: fmt.Sprintf("is truncated: %d bytes left in %s, need 8", end-off, where(parent))}
	}
	if err := w.read(buf[:8], off, ""); err != nil {
		return header{}, err
	}
	h := header{typ: string(buf[4:8]), off: off, hdrLen: 8}
	size := int64(binary.BigEndian.Uint32(buf[:4]))
	switch size {
	case 1: // 64-bit largesize follows the type
		if end-off < 16 {
			return header{}, &BoxError{Type: h.typ, Offset: off, Kind: ErrTruncated,
				Detail: fmt.Sprintf("is truncated: largesize header needs 16 bytes, %d left in %s", end-off, where(parent))}
		}
		if err := w.read(buf[8:16], off+8, h.typ); err != nil {
			return header{}, err
		}
		large := binary.BigEndian.Uint64(buf[8:16])
		if large > math.MaxInt64 {
			return header{}, &BoxError{Type: h.typ, Offset: off, Kind: ErrOverrun,
				Detail: fmt.Sprintf("overruns %s (largesize %d)", where(parent), large)}
		}
		size, h.hdrLen = int64(large), 16
	case 0: // the box extends to the end of its container
		size = end - off
	}
	if h.typ == "uuid" {
		h.hdrLen += 16 // extended type
	}
	if size < h.hdrLen {
		return header{}, &BoxError{Type: h.typ, Offset: off, Kind: ErrBoxTooSmall,
			Detail: fmt.Sprintf("declares size %d, smaller than its %d-byte header", size, h.hdrLen)}
	}
	if size > end-off {
		return header{}, &BoxError{Type: h.typ, Offset: off, Kind: ErrOverrun,
			Detail: fmt.Sprintf("overruns %s (size %d, %d bytes available)", where(parent), size, end-off)}
	}
	h.size = size
	return h, nil
}

func where(parent string) string {
	if parent == "" {
		return "file"
	}
	return fmt.Sprintf("parent %q", parent)
}

// read fills p from off. A short read means the input is shorter than the size
// the caller promised, which is a truncated file rather than an I/O failure.
func (w *walker) read(p []byte, off int64, typ string) error {
	n, err := w.r.ReadAt(p, off)
	if n == len(p) {
		return nil // ReadAt may report io.EOF alongside a full read at the end
	}
	if err == nil || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return &BoxError{Type: typ, Offset: off, Kind: ErrTruncated,
			Detail: fmt.Sprintf("is truncated: input ended after %d of %d bytes", max(n, 0), len(p))}
	}
	return fmt.Errorf("mp4: read %d bytes at offset %d: %w", len(p), off, err)
}

func (w *walker) parseFtyp(h header) error {
	payload := h.size - h.hdrLen
	if payload < 8 || (payload-8)%4 != 0 {
		return &BoxError{Type: h.typ, Offset: h.off, Kind: ErrBadFtyp,
			Detail: fmt.Sprintf("has a %d-byte payload; want 8 plus 4 per compatible brand", payload)}
	}
	var b [8]byte
	if err := w.read(b[:], h.off+h.hdrLen, h.typ); err != nil {
		return err
	}
	w.info.MajorBrand = string(b[:4])
	w.info.MinorVersion = binary.BigEndian.Uint32(b[4:8])
	return nil
}

// mvhdPayload is the full mvhd payload length per version: the version/flags word,
// the version-sized times, then rate, volume, matrix, pre_defined and next_track_ID.
var mvhdPayload = [2]int64{100, 112}

func (w *walker) parseMvhd(h header) error {
	payload := h.size - h.hdrLen
	var b [32]byte // version/flags + the largest (version 1) time fields
	if payload < 4 {
		return &BoxError{Type: h.typ, Offset: h.off, Kind: ErrBadMvhd,
			Detail: fmt.Sprintf("has a %d-byte payload; need at least 4", payload)}
	}
	start := h.off + h.hdrLen
	if err := w.read(b[:4], start, h.typ); err != nil {
		return err
	}
	version := b[0]
	if version > 1 {
		return &BoxError{Type: h.typ, Offset: h.off, Kind: ErrBadMvhd,
			Detail: fmt.Sprintf("has unknown version %d", version)}
	}
	if payload < mvhdPayload[version] {
		return &BoxError{Type: h.typ, Offset: h.off, Kind: ErrBadMvhd,
			Detail: fmt.Sprintf("has a %d-byte payload; version %d needs %d", payload, version, mvhdPayload[version])}
	}
	if version == 0 { // creation(4) modification(4) timescale(4) duration(4)
		if err := w.read(b[4:20], start+4, h.typ); err != nil {
			return err
		}
		w.info.Timescale = binary.BigEndian.Uint32(b[12:16])
		w.info.Duration = uint64(binary.BigEndian.Uint32(b[16:20]))
	} else { // creation(8) modification(8) timescale(4) duration(8)
		if err := w.read(b[4:32], start+4, h.typ); err != nil {
			return err
		}
		w.info.Timescale = binary.BigEndian.Uint32(b[20:24])
		w.info.Duration = binary.BigEndian.Uint64(b[24:32])
	}
	w.info.MvhdVersion = version
	if w.info.Timescale == 0 {
		return ErrZeroTimescale
	}
	if w.info.Duration == 0 {
		return ErrZeroDuration
	}
	return nil
}
