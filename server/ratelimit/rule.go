package ratelimit

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Rule is one limit: a burst of N events, refilled at N per Per. The zero
// Rule stands for "the default" in a Limits; Off is explicit.
type Rule struct {
	N   int
	Per time.Duration
}

// Off is the rule that never refuses.
var Off = Rule{N: -1}

// IsOff reports whether r never refuses.
func (r Rule) IsOff() bool { return r.N <= 0 || r.Per <= 0 }

// Every is the refill interval of one token.
func (r Rule) Every() time.Duration { return r.Per / time.Duration(r.N) }

// String is the rule in the form ParseRule reads: "N/D" or "off".
func (r Rule) String() string {
	if r.IsOff() {
		return "off"
	}
	return strconv.Itoa(r.N) + "/" + r.Per.String()
}

// ParseRule reads "N/D" (N events, then N more per duration D, for
// example "10/1m") or "off".
func ParseRule(s string) (Rule, error) {
	if s == "off" {
		return Off, nil
	}
	n, d, ok := strings.Cut(s, "/")
	if !ok {
		return Rule{}, fmt.Errorf("rate limit %q: want N/DURATION (e.g. 10/1m) or off", s)
	}
	count, err := strconv.Atoi(n)
	if err != nil || count <= 0 {
		return Rule{}, fmt.Errorf("rate limit %q: %q is not a positive count", s, n)
	}
	per, err := time.ParseDuration(d)
	if err != nil || per <= 0 {
		return Rule{}, fmt.Errorf("rate limit %q: %q is not a positive duration", s, d)
	}
	if per/time.Duration(count) <= 0 {
		return Rule{}, fmt.Errorf("rate limit %q: more than one event per nanosecond", s)
	}
	return Rule{N: count, Per: per}, nil
}

// Set implements flag.Value.
func (r *Rule) Set(s string) error {
	v, err := ParseRule(s)
	if err != nil {
		return err
	}
	*r = v
	return nil
}
