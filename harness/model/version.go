package model

import (
	"embed"

	"github.com/rendermac/rendermac/internal/provenance"
)

// RulesVersion is bumped by hand whenever a rule of the model changes
// meaning (a reply code, a check order, an invariant). ModelVersion adds a
// hash of the package's sources, so an edit nobody bumped for still shows.
//
// 2: an accepted commit (transaction 1 past its refusals) or fail
// heartbeats the device; no refused frame does.
// 3: Withdraw (an undelivered offer's attempt fails offer_withdrawn and
// spends no budget: withdrawn_count, invariant 5 over the spent attempts).
const RulesVersion = 3

//go:embed *.go
var sources embed.FS

// ModelVersion names the rules this build of the model runs, e.g.
// "1+3f2a9c0d1e4b": RulesVersion and a hash of the non-test sources.
func ModelVersion() string { return provenance.SourceVersion(RulesVersion, sources) }
