package runner

import (
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strings"

	"github.com/rendermac/rendermac/internal/clock"
	"github.com/rendermac/rendermac/protocol"
)

// Env is what the agent's host gives runners.
type Env struct {
	// Clock drives the synthetic runner's delay.
	Clock clock.Clock
	// FFmpeg is the ffmpeg binary ("" means ffmpeg on PATH).
	FFmpeg string
	// GOOS picks the encoders of a transcode ("" means runtime.GOOS).
	GOOS string
}

// Kind builds the runner of one runner kind for a catalogue entry.
type Kind struct {
	// New returns the runner for svc (svc.Runner.Kind is this kind's).
	New func(svc protocol.Service, env Env) (Runner, error)
	// NeedsFFmpeg says that the agent must find a working ffmpeg at start.
	NeedsFFmpeg bool
}

// Kinds is the registry of runner kinds by protocol.RunnerSpec.Kind. A new
// kind is one entry: its file adds it here (in an init function, so that
// kinds live in their own files), and protocol.RunnerKinds names it.
var Kinds = map[string]Kind{
	protocol.RunnerSynthetic: {New: func(_ protocol.Service, env Env) (Runner, error) {
		return Synthetic{Clock: env.Clock}, nil
	}},
	protocol.RunnerFFmpeg: {NeedsFFmpeg: true, New: func(svc protocol.Service, env Env) (Runner, error) {
		return FFmpeg{Path: env.FFmpeg, Width: svc.Runner.Width, Height: svc.Runner.Height}, nil
	}},
	protocol.RunnerTranscode: {NeedsFFmpeg: true, New: func(svc protocol.Service, env Env) (Runner, error) {
		return Transcode{Path: env.FFmpeg, GOOS: env.GOOS, Codec: svc.Runner.Codec, Width: svc.Runner.Width,
			Height: svc.Runner.Height, BitrateKbps: svc.Runner.BitrateKbps}, nil
	}},
}

// ForServices builds the runners of the services named offered, each from
// its catalogue entry. A name the catalogue lacks, or whose kind this agent
// does not have, is an error naming it.
func ForServices(catalogue []protocol.Service, offered []string, env Env) (map[string]Runner, error) {
	if env.GOOS == "" {
		env.GOOS = runtime.GOOS
	}
	out := make(map[string]Runner, len(offered))
	for _, name := range offered {
		svc, ok := protocol.FindService(catalogue, name)
		if !ok {
			return nil, fmt.Errorf("service %q is not in the catalogue (available: %s)", name, strings.Join(Names(catalogue), ", "))
		}
		k, ok := Kinds[svc.Runner.Kind]
		if !ok {
			return nil, fmt.Errorf("service %q: runner kind %q is not built into this agent (kinds: %s)",
				name, svc.Runner.Kind, strings.Join(slices.Sorted(maps.Keys(Kinds)), ", "))
		}
		r, err := k.New(svc, env)
		if err != nil {
			return nil, fmt.Errorf("service %q: %w", name, err)
		}
		out[name] = r
	}
	return out, nil
}

// NeedsFFmpeg reports whether any offered service's kind runs ffmpeg.
func NeedsFFmpeg(catalogue []protocol.Service, offered []string) bool {
	for _, name := range offered {
		if svc, ok := protocol.FindService(catalogue, name); ok && Kinds[svc.Runner.Kind].NeedsFFmpeg {
			return true
		}
	}
	return false
}

// Names are the catalogue's service names, sorted.
func Names(catalogue []protocol.Service) []string {
	names := make([]string, 0, len(catalogue))
	for _, s := range catalogue {
		names = append(names, s.Name)
	}
	slices.Sort(names)
	return names
}
