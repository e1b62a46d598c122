package runner

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"time"

	"github.com/rendermac/rendermac/internal/clock"
	"github.com/rendermac/rendermac/internal/mp4"
)

// Limits of the synthetic service's parameters.
const (
	syntheticSeedMaxLen    = 64
	syntheticDurationMaxMs = 600_000
	// syntheticMdatMaxBytes lets a test commit a 1 GiB output; Run streams
	// the file, so the agent holds 64 KiB of it whatever the size.
	syntheticMdatMaxBytes = 1 << 30
	syntheticDelayMaxMs   = 600_000
	// delayStep bounds how long one wait on the clock lasts, so that a cancel
	// is noticed within a step even on a clock whose After ignores ctx.
	delayStep = 50 * time.Millisecond
)

// Synthetic is the built-in synthetic.mp4 service: it writes mp4.Synthetic,
// needs no FFmpeg, and is deterministic in its parameters, so tests and CI
// can run the whole pipeline and predict the output's digest.
//
// Parameters: seed (string, at most 64 bytes, default ""), duration_ms
// (1..600000, default 1000), mdat_bytes (1..1073741824, default 4096) and
// delay_ms (0..600000, default 0), a wait on the Clock before writing that
// lets a test cancel a job mid-run.
type Synthetic struct {
	Clock clock.Clock
}

// SyntheticParams are the synthetic service's validated parameters.
type SyntheticParams struct {
	Seed       string
	DurationMs int
	MdatBytes  int
	DelayMs    int
}

// ParseSyntheticParams validates params for synthetic.mp4.
func ParseSyntheticParams(params map[string]string) (SyntheticParams, error) {
	var p SyntheticParams
	if err := checkKnown(params, "seed", "duration_ms", "mdat_bytes", "delay_ms"); err != nil {
		return p, err
	}
	p.Seed = params["seed"]
	if len(p.Seed) > syntheticSeedMaxLen {
		return p, &ParamError{Param: "seed", Reason: fmt.Sprintf("must be at most %d bytes, got %d", syntheticSeedMaxLen, len(p.Seed))}
	}
	var err error
	if p.DurationMs, err = intParam(params, "duration_ms", 1, syntheticDurationMaxMs, 1000); err != nil {
		return p, err
	}
	if p.MdatBytes, err = intParam(params, "mdat_bytes", 1, syntheticMdatMaxBytes, mp4.DefaultMdatBytes); err != nil {
		return p, err
	}
	if p.DelayMs, err = intParam(params, "delay_ms", 0, syntheticDelayMaxMs, 0); err != nil {
		return p, err
	}
	return p, nil
}

// File returns the bytes Run writes for p (all of them in memory: for
// tests of small outputs).
func (p SyntheticParams) File() []byte {
	var b bytes.Buffer
	if _, err := mp4.WriteSynthetic(&b, p.mp4()); err != nil {
		panic(err) // MdatBytes was validated against a bound far below mp4's
	}
	return b.Bytes()
}

func (p SyntheticParams) mp4() mp4.SyntheticParams {
	return mp4.SyntheticParams{Seed: p.Seed, Timescale: 1000, Duration: uint64(p.DurationMs), MdatBytes: p.MdatBytes, Track: true}
}

// Run validates the parameters, waits delay_ms on the clock, then writes the
// file. It ignores inputPath: the synthetic service has no input to read.
func (s Synthetic) Run(ctx context.Context, spec Spec, _, outputPath string) error {
	p, err := ParseSyntheticParams(spec.Params)
	if err != nil {
		return err
	}
	if err := s.sleep(ctx, time.Duration(p.DelayMs)*time.Millisecond); err != nil {
		return err
	}
	f, err := os.OpenFile(outputPath, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("write synthetic output: %w", err)
	}
	_, err = mp4.WriteSynthetic(f, p.mp4())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write synthetic output: %w", err)
	}
	return nil
}

func (s Synthetic) sleep(ctx context.Context, d time.Duration) error {
	clk := s.Clock
	if clk == nil {
		clk = clock.Real{}
	}
	for d > 0 {
		step := min(d, delayStep)
		select {
		case <-ctx.Done():
			return fmt.Errorf("synthetic delay: %w", context.Cause(ctx))
		case <-clk.After(step):
		}
		d -= step
	}
	return ctx.Err()
}
