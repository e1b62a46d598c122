package main

import (
	"flag"
	"maps"
	"strings"

	"github.com/rendermac/rendermac/harness/evidence"
	"github.com/rendermac/rendermac/harness/fuzz"
)

// cardCoverage converts a campaign's coverage into the card's, with the
// gate's required lists and the tables its matrices are drawn against.
func cardCoverage(c fuzz.Coverage) *evidence.Coverage {
	req, tab := fuzz.RequiredCoverage(), fuzz.TransitionTables()
	return &evidence.Coverage{
		JobTransitions:     maps.Clone(c.JobTransitions),
		AttemptTransitions: maps.Clone(c.AttemptTransitions),
		Replies:            maps.Clone(c.Replies),
		Faults:             maps.Clone(c.Faults),
		FaultPhases:        maps.Clone(c.FaultPhases),
		Required: evidence.CoverageRequired{JobTransitions: req.JobTransitions,
			AttemptTransitions: req.AttemptTransitions, Replies: req.Replies, Faults: req.Faults},
		Tables: evidence.CoverageTables{JobStatuses: tab.JobStatuses, AttemptStatuses: tab.AttemptStatuses,
			JobTransitions: tab.JobTransitions, AttemptTransitions: tab.AttemptTransitions,
			FaultPhases: fuzz.FaultPhaseNames()},
	}
}

// weightFlag is a repeatable --weight op=N: it sets the op's weight in gen
// and keeps the settings, so that replay commands repeat them.
type weightFlag struct {
	gen   *fuzz.GenConfig
	specs *[]string
}

func (w weightFlag) String() string {
	if w.specs == nil {
		return ""
	}
	return strings.Join(*w.specs, " ")
}

func (w weightFlag) Set(s string) error {
	if err := w.gen.SetWeight(s); err != nil {
		return err
	}
	*w.specs = append(*w.specs, s)
	return nil
}

// addWeightFlag registers --weight on fs.
func addWeightFlag(fs *flag.FlagSet, gen *fuzz.GenConfig, specs *[]string) {
	*gen = fuzz.DefaultGenConfig
	fs.Var(weightFlag{gen: gen, specs: specs}, "weight", "op=N: the generator's weight for op (repeatable; 0 never draws it; ops: "+
		strings.Join(fuzz.OpNames(), ", ")+"; default "+fuzz.DefaultGenConfig.WeightsString()+")")
}
