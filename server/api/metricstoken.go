package api

import (
	"fmt"
	"os"
	"strings"
)

// MinMetricsTokenBytes keeps a metrics token from being guessable.
const MinMetricsTokenBytes = 16

// LoadMetricsToken reads the /metrics bearer token from path ("": none) and
// returns only its hash (HashSecret), which is all a server keeps
// (Config.MetricsTokenHash). Like the signing key, the file must not be
// readable by group or others.
func LoadMetricsToken(path string) (string, error) {
	token, err := ReadMetricsToken(path)
	if err != nil || token == "" {
		return "", err
	}
	return HashSecret(token), nil
}

// ReadMetricsToken reads the bearer token of /metrics from path ("": none),
// for a client that must send it (the bench). It refuses a file readable by
// group or others, and a token that is not one line of at least
// MinMetricsTokenBytes; no error holds the file's content, so the token is
// never logged.
func ReadMetricsToken(path string) (string, error) {
	if path == "" {
		return "", nil
	}
	fi, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("metrics token: %w", err)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return "", fmt.Errorf("metrics token %s has mode %04o, readable by group or others; run `chmod 600 %s`", path, perm, path)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("metrics token: %w", err)
	}
	token := strings.TrimSpace(string(raw))
	if len(token) < MinMetricsTokenBytes || strings.ContainsAny(token, " \t\r\n") {
		return "", fmt.Errorf("metrics token %s: want one line of at least %d bytes without spaces (e.g. `openssl rand -hex 32`)",
			path, MinMetricsTokenBytes)
	}
	return token, nil
}
