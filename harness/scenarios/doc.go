// Package scenarios is the named phase-fault catalogue (SPEC section 7) and
// its script language: every scenario is a script in testdata/scenarios
// that names its fault, the phase it strikes, the outcome it expects and
// the broken variants it must catch, then drives one or more full stacks
// (service, gateway and API on one listener) step by step on a pinned
// clock. catalogue_parse.go describes the language; scenario_*.go holds
// one handler per command. The databases and the synthetic output come
// from package targets.
package scenarios
