// Package evidence writes dated qualification evidence cards for release
// managers: a Markdown card, its JSON twin, JUnit XML for CI systems and an
// HTML card with a timeline per scenario. It imports only the standard
// library and tablewriter; callers convert their results into its types.
// Output is deterministic: maps are sorted, and with NoTimings every duration
// is left out, so two runs of the same commit give byte-identical files.
//
// WriteAll writes the four files of one card atomically; Diff says, line by
// line, what changed between two runs; ReadJSON reads a card back, for
// example so that `rendermac replay CARD.json` can rerun its failures.
package evidence
