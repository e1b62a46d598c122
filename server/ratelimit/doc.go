// Package ratelimit is the control plane's abuse limiter: one token bucket
// (golang.org/x/time/rate) per key — a client IP, a buyer, a device — with
// a bounded number of keys, judged at the instants of an injected clock so
// that tests step time instead of sleeping.
//
// A Rule "N/D" allows a burst of N events and refills at N per D. Idle keys
// (whose bucket has refilled to full, so that forgetting them changes no
// answer) are evicted first when the table is full; only when every key is
// busy is the least recently used busy key forgotten, which errs towards
// letting a client through rather than refusing everyone new.
package ratelimit
