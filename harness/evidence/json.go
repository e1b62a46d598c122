package evidence

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// WriteJSON writes the card's JSON twin: two-space indented, fields in the
// declaration order of the types in card.go, map keys sorted (encoding/json
// guarantees both), HTML characters left readable, and a trailing newline.
// With NoTimings every duration_ms is 0 and no_timings is true; the fields
// stay so that the schema is the same in both modes.
func WriteJSON(w io.Writer, c Card, o WriteOptions) error {
	c, err := prepare(c, o)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(c); err != nil {
		return fmt.Errorf("write json: %w", err)
	}
	return nil
}

// ReadJSON reads a card written by WriteJSON. It rejects unknown fields (a
// misspelt field in a hand-edited card must not silently vanish), trailing
// data and an empty input, naming the problem and where it is. Empty
// collections read back as empty, not nil, matching what WriteJSON wrote.
func ReadJSON(r io.Reader) (Card, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return Card{}, fmt.Errorf("read evidence card: %w", err)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return Card{}, errors.New("read evidence card: empty input")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var c Card
	if err := dec.Decode(&c); err != nil {
		return Card{}, fmt.Errorf("read evidence card: %w", describe(err, data))
	}
	if dec.More() {
		return Card{}, fmt.Errorf("read evidence card: unexpected data after the card at byte %d", dec.InputOffset())
	}
	return normalize(c), nil
}

// describe adds the line and column to syntax and type errors, which
// encoding/json reports only as a byte offset.
func describe(err error, data []byte) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Errorf("%w (%s)", err, position(data, syn.Offset))
	case errors.As(err, &typ):
		return fmt.Errorf("%w (%s)", err, position(data, typ.Offset))
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errors.New("truncated JSON: the card ends before its closing brace")
	}
	return err
}

func position(data []byte, offset int64) string {
	offset = min(offset, int64(len(data)))
	before := data[:offset]
	line := bytes.Count(before, []byte("\n")) + 1
	col := int(offset) - bytes.LastIndexByte(before, '\n')
	return fmt.Sprintf("line %d, column %d", line, col)
}
