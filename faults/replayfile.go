package faults

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// ReplayFile is a sequence with what is needed to run it again.
type ReplayFile struct {
	Target   string
	Mutation string
	Seq      Sequence
}

// WriteReplay writes r in the line format ReadReplay reads: a header of
// `key value` lines, then one event per line.
func WriteReplay(w io.Writer, r ReplayFile) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "# rendermac replay: rendermac fuzz --replay FILE\n")
	fmt.Fprintf(bw, "target %s\nseed %d\n", r.Target, r.Seq.Seed)
	if r.Mutation != "" {
		fmt.Fprintf(bw, "mutation %s\n", r.Mutation)
	}
	for _, ev := range r.Seq.Events {
		fmt.Fprintf(bw, "%s\n", ev)
	}
	return bw.Flush()
}

// ReadReplay parses a replay file; errors name the line.
func ReadReplay(rd io.Reader) (ReplayFile, error) {
	var r ReplayFile
	sc := bufio.NewScanner(rd)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, val, _ := strings.Cut(line, " ")
		switch key {
		case "target":
			r.Target = val
		case "mutation":
			r.Mutation = val
		case "seed":
			s, err := strconv.ParseUint(val, 10, 64)
			if err != nil {
				return r, fmt.Errorf("line %d: seed: %w", n, err)
			}
			r.Seq.Seed = s
		default:
			ev, err := ParseEvent(line)
			if err != nil {
				return r, fmt.Errorf("line %d: %w", n, err)
			}
			r.Seq.Events = append(r.Seq.Events, ev)
		}
	}
	return r, sc.Err()
}
