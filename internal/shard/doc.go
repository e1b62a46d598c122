// Package shard splits a run's work into N disjoint, contiguous slices so
// that N CI workers can each run one (K/N) and their results can be merged
// back, in order, into what one unsharded run would have produced.
package shard
