package main

import (
	"maps"

	"github.com/rendermac/rendermac/evidence"
	"github.com/rendermac/rendermac/faults"
)

// cardCoverage converts a campaign's coverage into the card's, with the
// gate's required lists and the tables its matrices are drawn against.
func cardCoverage(c faults.Coverage) *evidence.Coverage {
	req, tab := faults.RequiredCoverage(), faults.TransitionTables()
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
			FaultPhases: faults.FaultPhaseNames()},
	}
}
