package evidence

import (
	"bytes"
	"fmt"
)

// The operators' console (server/console) shows cards from their JSON
// alone and may not import this package: the server's wiring hands it
// these two functions.

// HTMLFromJSON renders a JSON card (as WriteJSON wrote it) as the HTML card
// WriteHTML writes, durations kept as recorded.
func HTMLFromJSON(card []byte) ([]byte, error) {
	c, err := ReadJSON(bytes.NewReader(card))
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := WriteHTML(&buf, c, WriteOptions{NoTimings: c.NoTimings}); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// DiffJSON is Diff of two JSON cards: what `rendermac card diff A B`
// prints, one line a change (none: no differences).
func DiffJSON(a, b []byte) ([]string, error) {
	ca, err := ReadJSON(bytes.NewReader(a))
	if err != nil {
		return nil, fmt.Errorf("card A: %w", err)
	}
	cb, err := ReadJSON(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("card B: %w", err)
	}
	lines := Diff(ca, cb)
	for _, l := range DiffLive(ca, cb) {
		lines = append(lines, "live measurement: "+l)
	}
	return lines, nil
}
