// Package docs embeds the contract, SPEC.md and semantics.md, so that a
// binary built from this tree carries the text it was built against: the
// contract check of `rendermac qualify` (package contract) reads the tables
// from here and works from any directory.
package docs

import _ "embed"

// SPEC is docs/SPEC.md, the contract.
//
//go:embed SPEC.md
var SPEC string

// Semantics is docs/semantics.md, the operational semantics that pin what
// SPEC.md leaves open.
//
//go:embed semantics.md
var Semantics string

// File names the two documents as checks cite them ("docs/SPEC.md:97").
const (
	SPECFile      = "docs/SPEC.md"
	SemanticsFile = "docs/semantics.md"
)
