package runner

import (
	"fmt"
	"slices"
	"strconv"
)

// ParamError says which job parameter is unacceptable and why.
type ParamError struct {
	Param  string
	Reason string
}

func (e *ParamError) Error() string { return fmt.Sprintf("param %q: %s", e.Param, e.Reason) }

// checkKnown rejects a parameter outside allowed. Keys are checked in sorted
// order so that a job with several bad keys always names the same one.
func checkKnown(params map[string]string, allowed ...string) error {
	keys := make([]string, 0, len(params))
	for k := range params {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !slices.Contains(allowed, k) {
			return &ParamError{Param: k, Reason: fmt.Sprintf("unknown parameter (allowed: %v)", allowed)}
		}
	}
	return nil
}

// intParam parses params[name] as a decimal integer in lo..hi, or returns def
// when it is absent.
func intParam(params map[string]string, name string, lo, hi, def int) (int, error) {
	s, ok := params[name]
	if !ok {
		return def, nil
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < lo || v > hi {
		return 0, &ParamError{Param: name, Reason: fmt.Sprintf("must be an integer %d..%d, got %q", lo, hi, clip(s))}
	}
	return v, nil
}

// enumParam returns params[name] if it is one of allowed, or def when absent.
func enumParam(params map[string]string, name string, allowed []string, def string) (string, error) {
	s, ok := params[name]
	if !ok {
		return def, nil
	}
	if !slices.Contains(allowed, s) {
		return "", &ParamError{Param: name, Reason: fmt.Sprintf("must be one of %v, got %q", allowed, clip(s))}
	}
	return s, nil
}

// clip keeps a hostile value from flooding an error message or a log line.
func clip(s string) string {
	const show = 32
	if len(s) > show {
		return s[:show] + "..."
	}
	return s
}
