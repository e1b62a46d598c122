package fuzz

import (
	"github.com/rendermac/rendermac/internal/provenance"

	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// ReplayFile is a sequence with what is needed to run it again.
type ReplayFile struct {
	Target string
	// Variant is the deliberately broken variant the sequence ran against
	// ("" none). On disk its key stays `mutation`, the name it had before
	// issue 26: replay files already written (users' failures, attached to
	// issues) carry it, and a reader at an older commit would take a
	// `variant` line for an event, so renaming the key would break both
	// directions for no gain.
	Variant string
	// Build is the provenance of the build that wrote the file; replay
	// refuses a file from another build unless forced.
	Build provenance.Build
	// Weights is the generator's weights that drew the sequence
	// (GenConfig.WeightsString), so `--seed S` with them draws it again.
	Weights string
	Seq     Sequence
}

// WriteReplay writes r in the line format ReadReplay reads: a header of
// `key value` lines, then one event per line.
func WriteReplay(w io.Writer, r ReplayFile) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "# rendermac replay: rendermac fuzz --replay FILE\n")
	fmt.Fprintf(bw, "target %s\nseed %d\n", r.Target, r.Seq.Seed)
	if b := r.Build; b.Commit != "" {
		fmt.Fprintf(bw, "build commit=%s dirty=%t go=%s schema=%d model=%s generator=%s\n",
			b.Commit, b.Dirty, b.GoVersion, b.SchemaVersion, b.ModelVersion, b.GeneratorVersion)
	}
	if r.Variant != "" {
		fmt.Fprintf(bw, "mutation %s\n", r.Variant)
	}
	if r.Weights != "" {
		fmt.Fprintf(bw, "weights %s\n", r.Weights)
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
			r.Variant = val
		case "weights":
			if _, err := ParseWeights(val); err != nil {
				return r, fmt.Errorf("line %d: %w", n, err)
			}
			r.Weights = val
		case "build":
			b, err := parseBuild(val)
			if err != nil {
				return r, fmt.Errorf("line %d: build: %w", n, err)
			}
			r.Build = b
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

// parseBuild reads the `build key=value ...` header line.
func parseBuild(val string) (provenance.Build, error) {
	var b provenance.Build
	for _, kv := range strings.Fields(val) {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return b, fmt.Errorf("%q is not key=value", kv)
		}
		switch k {
		case "commit":
			b.Commit = v
		case "dirty":
			b.Dirty = v == "true"
		case "go":
			b.GoVersion = v
		case "model":
			b.ModelVersion = v
		case "generator":
			b.GeneratorVersion = v
		case "schema":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return b, fmt.Errorf("schema: %w", err)
			}
			b.SchemaVersion = n
		default:
			return b, fmt.Errorf("unknown key %q", k)
		}
	}
	return b, nil
}
