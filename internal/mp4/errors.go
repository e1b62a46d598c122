package mp4

import (
	"errors"
	"fmt"
)

// ErrInvalid matches (via errors.Is) every error Check returns for malformed or
// unacceptable media. An error from Check that does not match ErrInvalid came from
// the underlying reader, so the input may be fine and the check worth retrying.
var ErrInvalid = errors.New("mp4: invalid media")

// formatError is a sentinel that also matches ErrInvalid, so callers can test for
// one specific defect or for "bad media" in general.
type formatError struct{ msg string }

func (e *formatError) Error() string { return e.msg }

// Is reports whether target is ErrInvalid; equality with itself is handled by errors.Is.
func (e *formatError) Is(target error) bool { return target == ErrInvalid }

// Sentinel defects. Each matches ErrInvalid. The structural ones (ErrTruncated to
// ErrBadMvhd) arrive wrapped in a *BoxError that names the box and its offset.
var (
	// ErrMissingFtyp: the input holds no box at all, so there is no ftyp.
	ErrMissingFtyp error = &formatError{"mp4: missing ftyp box"}
	// ErrMissingMoov: no top-level moov box.
	ErrMissingMoov error = &formatError{"mp4: missing moov box"}
	// ErrMissingMvhd: the moov box has no mvhd child.
	ErrMissingMvhd error = &formatError{"mp4: missing mvhd box in moov"}
	// ErrNoTracks: the moov box holds no trak: a movie with nothing to play.
	ErrNoTracks error = &formatError{"mp4: no trak box in moov"}
	// ErrMissingMdat: no top-level mdat box.
	ErrMissingMdat error = &formatError{"mp4: missing mdat box"}
	// ErrZeroTimescale: mvhd timescale is 0, so the duration means nothing.
	ErrZeroTimescale error = &formatError{"mp4: mvhd timescale is zero"}
	// ErrZeroDuration: mvhd duration is 0; the contract requires duration > 0.
	ErrZeroDuration error = &formatError{"mp4: mvhd duration is zero"}

	// ErrTruncated: a box header or payload is cut off by its parent or the file end.
	ErrTruncated error = &formatError{"mp4: truncated box"}
	// ErrBoxTooSmall: a declared size is smaller than the box's own header.
	ErrBoxTooSmall error = &formatError{"mp4: box size smaller than header"}
	// ErrOverrun: a declared size extends past the parent box or the file.
	ErrOverrun error = &formatError{"mp4: box overruns its container"}
	// ErrFtypNotFirst: the first top-level box is not ftyp.
	ErrFtypNotFirst error = &formatError{"mp4: first box is not ftyp"}
	// ErrDuplicateBox: a box that must be unique (ftyp, moov, mvhd) appears twice.
	ErrDuplicateBox error = &formatError{"mp4: duplicate box"}
	// ErrTooDeep: container nesting exceeds MaxDepth.
	ErrTooDeep error = &formatError{"mp4: boxes nested too deeply"}
	// ErrTooManyBoxes: the walk met more than MaxBoxes boxes.
	ErrTooManyBoxes error = &formatError{"mp4: too many boxes"}
	// ErrBadFtyp: the ftyp payload is not a major brand, minor version and brand list.
	ErrBadFtyp error = &formatError{"mp4: malformed ftyp box"}
	// ErrBadMvhd: the mvhd version is unknown or its payload is too short for it.
	ErrBadMvhd error = &formatError{"mp4: malformed mvhd box"}
)

// BoxError locates a structural defect: which box, where, and what is wrong.
// Unwrap yields one of the sentinels above, so errors.Is works on both the
// specific defect and ErrInvalid.
type BoxError struct {
	// Type is the box's four-character code, or "" when the header itself could
	// not be read.
	Type string
	// Offset is the byte offset of the box's first header byte in the input.
	Offset int64
	// Detail says what is wrong, phrased to follow the box name.
	Detail string
	// Kind is the sentinel this defect is an instance of.
	Kind error
}

// Error renders e.g. `mp4: box "mdat" at offset 1234 overruns file`.
func (e *BoxError) Error() string {
	if e.Type == "" {
		return fmt.Sprintf("mp4: box header at offset %d %s", e.Offset, e.Detail)
	}
	return fmt.Sprintf("mp4: box %q at offset %d %s", e.Type, e.Offset, e.Detail)
}

// Unwrap returns the sentinel kind.
func (e *BoxError) Unwrap() error { return e.Kind }
