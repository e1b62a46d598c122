package fuzz

import (
	"time"

	"github.com/rendermac/rendermac/protocol"
)

// GenConfig shapes generated sequences. Weights are per Op; perturbation
// probabilities are integer ratios.
type GenConfig struct {
	Weights [opCount]int
	// Perturb is the chance of each identity perturbation on a fenced frame.
	Perturb Ratio
	// Duplicate and Reorder are the chances that a step repeats the previous
	// frame or swaps places with it.
	Duplicate, Reorder Ratio
	// NextJob is the chance, drawing the job a frame aims at, of passing to
	// the next one in the view's aim order (live attempts first): the lower,
	// the more frames reach a live attempt.
	NextJob Ratio
}

// DefaultGenConfig is the campaign's default mix, weighted toward live
// attempts: enough creates and leases that some attempt is usually live,
// few enough ticks that leases outlive a few frames, and job indexes that
// mostly pick the first job of the aim order (live attempts first). The
// distribution it gives (replies by code, faults by phase) is in the card's
// coverage matrix; CHANGELOG.md says how it moved in GeneratorRulesVersion 4.
var DefaultGenConfig = GenConfig{
	Weights: [opCount]int{
		OpCreate: 12, OpLease: 18, OpProgress: 24, OpCommit: 14, OpCommitBegin: 4,
		OpCommitFinish: 3, OpFail: 5, OpCancel: 5, OpTick: 8, OpSweep: 6, OpUpload: 3, OpBoundary: 6, OpWithdraw: 3,
		OpPause: 2, OpResume: 3,
	},
	Perturb:   Ratio{1, 8},
	Duplicate: Ratio{1, 25},
	Reorder:   Ratio{1, 25},
	NextJob:   Ratio{1, 4},
}

// Sequence is a generated (or shrunk, or hand-written) run.
type Sequence struct {
	Seed   uint64
	Events []Event
}

// Generate draws steps events from seed. The same seed and config give the
// same sequence.
func Generate(seed uint64, steps int, cfg GenConfig) Sequence {
	seq, _ := generate(seed, steps, cfg)
	return seq
}

// generate is Generate that also returns, per step, the frame-level fault
// the generator applied there (FaultDuplicate, FaultReorder or ""), which
// the events alone do not show.
func generate(seed uint64, steps int, cfg GenConfig) (Sequence, []string) {
	g := NewRng(seed)
	seq := Sequence{Seed: seed, Events: make([]Event, 0, steps)}
	marks := make([]string, 0, steps+1)
	for len(seq.Events) < steps {
		n := len(seq.Events)
		switch {
		case n > 0 && g.Chance(cfg.Duplicate):
			seq.Events = append(seq.Events, seq.Events[n-1])
			marks = append(marks, FaultDuplicate)
		case n > 0 && g.Chance(cfg.Reorder):
			ev := genEvent(g, cfg)
			seq.Events = append(seq.Events, seq.Events[n-1])
			seq.Events[n-1] = ev
			marks = append(marks, FaultReorder) // the earlier-drawn frame arrives late
		default:
			seq.Events = append(seq.Events, genEvent(g, cfg))
			marks = append(marks, "")
		}
	}
	seq.Events = seq.Events[:steps]
	return seq, marks[:steps]
}

// unknownService is a service no device offers and the catalogue lacks.
const unknownService = "no.such.service"

// clockJump is the tick from which a tick counts as a clock jump.
const clockJump = time.Minute

var phases = []protocol.AttemptStatus{protocol.AttemptLeased, protocol.AttemptDownloading, protocol.AttemptRunning, protocol.AttemptUploading}

func genEvent(g *Rng, cfg GenConfig) Event {
	ev := Event{Op: Op(g.Weighted(cfg.Weights[:])), Device: -1, Buyer: -1}
	switch ev.Op {
	case OpProgress, OpCommit, OpCommitBegin, OpCommitFinish, OpFail, OpCancel, OpUpload, OpWithdraw:
		ev.Job = geometric(g, 8, cfg.NextJob)
	}
	switch ev.Op {
	case OpCreate:
		genCreate(g, &ev)
	case OpLease:
		ev.Device = g.IntN(len(WorldDevices))
	case OpProgress:
		genFence(g, cfg, &ev)
		ev.Token = TokenRight // progress presents no token
		switch {
		case g.Chance(Ratio{1, 5}):
			ev.Phase = phases[g.IntN(len(phases))] // any phase: may regress
		case g.Chance(Ratio{1, 2}):
			ev.Phase = protocol.AttemptUploading // skip ahead, as the table allows
		default:
			// "": the phase after the last one reported, resolved at apply time.
		}
	case OpCommit, OpCommitBegin:
		genFence(g, cfg, &ev)
		ev.OutputOK = !g.Chance(Ratio{1, 6})
	case OpCommitFinish, OpUpload:
		ev.Attempt = pick(g, cfg.Perturb, 0, 1)
	case OpFail:
		genFence(g, cfg, &ev)
		ev.Code = protocol.FailureCodes[g.IntN(len(protocol.FailureCodes))]
		if g.Chance(cfg.Perturb) {
			ev.Code = "made_up_code"
		}
	case OpWithdraw:
		// Fenced like a fail; without a perturbation it is the gateway's
		// own, aimed (like every frame) mostly at a live attempt, which a
		// lease just before it leaves leased.
		genFence(g, cfg, &ev)
	case OpCancel:
		if g.Chance(cfg.Perturb) {
			ev.Buyer = g.IntN(len(WorldBuyers))
		}
	case OpTick:
		ev.Advance = time.Duration(g.Between(500, 20_000)) * time.Millisecond
		if g.Chance(Ratio{1, 20}) {
			ev.Advance = time.Duration(g.Between(60, 900)) * time.Second // a clock jump
		}
	case OpPause, OpResume:
		genPause(g, &ev)
	case OpBoundary:
		ev.At = Boundary(g.IntN(int(boundaryCount)))
		ev.OffsetUs = g.IntN(3) - 1
		ev.Job = geometric(g, 8, cfg.NextJob) // the earliest instant after now, mostly
		ev.Advance = time.Duration(g.Between(500, 20_000)) * time.Millisecond
	}
	return ev
}

// pauseServices are the services pause and resume draw: the busiest
// (synthetic.mp4, which two devices offer) most often.
var pauseServices = []string{"synthetic.mp4", "synthetic.mp4", "ffmpeg.h264_720p", "ffmpeg.h264_1080p"}

// genPause draws the service an operator pauses or resumes, now and then
// one the catalogue lacks (not_found).
func genPause(g *Rng, ev *Event) {
	ev.Service = pauseServices[g.IntN(len(pauseServices))]
	if g.Chance(Ratio{1, 30}) {
		ev.Service = unknownService
	}
}

func genCreate(g *Rng, ev *Event) {
	ev.Buyer = g.IntN(len(WorldBuyers))
	services := []string{"synthetic.mp4", "synthetic.mp4", "ffmpeg.h264_720p", "ffmpeg.h264_1080p"}
	ev.Service = services[g.IntN(len(services))]
	if g.Chance(Ratio{1, 30}) {
		ev.Service = unknownService
	}
	ev.MaxAttempts = g.Between(1, 4)
	if g.Chance(Ratio{1, 30}) {
		ev.MaxAttempts = []int{0, 11}[g.IntN(2)]
	}
	ev.WindowSec = g.Between(30, 600)
	if g.Chance(Ratio{1, 4}) {
		ev.IdemKey = g.Between(1, 3)
	}
	ev.Param = g.IntN(3)
	if g.Chance(Ratio{1, 30}) {
		ev.Param = paramNUL + g.IntN(2) // a value Postgres would refuse: validation_error(params)
	}
}

// genFence fills the identity a fenced frame presents, perturbing each part
// independently: a stale attempt, a foreign device, a wrong epoch, a wrong
// or stale token.
func genFence(g *Rng, cfg GenConfig, ev *Event) {
	ev.Attempt = pick(g, cfg.Perturb, 0, g.Between(1, 2))
	if g.Chance(cfg.Perturb) {
		ev.Device = g.IntN(len(WorldDevices))
	}
	if g.Chance(cfg.Perturb) {
		ev.Epoch = []int{-1, 1}[g.IntN(2)]
	}
	if g.Chance(cfg.Perturb) {
		ev.Token = TokenKind(g.Between(1, 2))
	}
}

// geometric draws k below n, going on to k+1 with probability p: with p
// 1/2, 0 with probability 1/2, 1 with 1/4, ...
func geometric(g *Rng, n int, p Ratio) int {
	k := 0
	for k < n-1 && g.Chance(p) {
		k++
	}
	return k
}

func pick(g *Rng, p Ratio, usual, rare int) int {
	if g.Chance(p) {
		return rare
	}
	return usual
}
