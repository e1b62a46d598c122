// Package runner turns a lease offer's service name and parameters into an
// output file. A Runner is the only part of the agent that does media work;
// everything around it (download, hashing, upload, the lease protocol) lives
// in package agent, so a runner can be tested on its own and swapped for a
// fake in the agent's tests.
//
// Parameters come from a buyer's job and are untrusted. Every runner checks
// them against an allow-list before doing anything and reports the first bad
// one as a *ParamError naming it. The FFmpeg runners never go through a shell:
// they build a fixed argument vector in which only validated numbers, an
// allow-listed preset and the agent's own file paths vary.
package runner
