package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Credentials identify a paired device. DeviceToken is a bearer secret: it is
// written only to a 0600 file and never logged (String and LogValue omit it).
type Credentials struct {
	Server      string `json:"server"`
	DeviceID    string `json:"device_id"`
	DeviceToken string `json:"device_token"`
}

// String renders the credentials without the token, so that a stray %v in a
// log line or error cannot leak it.
func (c Credentials) String() string {
	return fmt.Sprintf("device %s at %s", c.DeviceID, c.Server)
}

// GoString keeps %#v from printing the token too.
func (c Credentials) GoString() string { return "agent.Credentials{" + c.String() + "}" }

// LogValue makes slog print the credentials without the token.
func (c Credentials) LogValue() slog.Value {
	return slog.GroupValue(slog.String("server", c.Server), slog.String("device_id", c.DeviceID))
}

// APIError is a control plane error reply: JSON {"code","message"} with an
// HTTP status. Code is "" when the body was not such an object.
type APIError struct {
	Status  int
	Code    string
	Message string
	// RetryAfter is the reply's Retry-After in seconds (a 429 rate_limited
	// or a 503), or zero without one.
	RetryAfter time.Duration
}

func (e *APIError) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("server replied %d %s: %s", e.Status, http.StatusText(e.Status), e.Message)
	}
	return fmt.Sprintf("server replied %d %s (%s)", e.Status, e.Code, e.Message)
}

// maxErrorBody bounds how much of an error reply is read; maxPlainErrorMessage
// how much of a non-JSON one is shown.
const (
	maxErrorBody         = 4096
	maxPlainErrorMessage = 200
)

// readAPIError turns a non-2xx response into an *APIError.
func readAPIError(resp *http.Response) *APIError {
	e := &APIError{Status: resp.StatusCode}
	if secs, err := strconv.Atoi(strings.TrimSpace(resp.Header.Get("Retry-After"))); err == nil && secs > 0 {
		e.RetryAfter = time.Duration(secs) * time.Second
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	var reply struct{ Code, Message string }
	if json.Unmarshal(body, &reply) == nil && reply.Code != "" {
		e.Code, e.Message = reply.Code, reply.Message
	} else {
		// Not our JSON shape (a proxy's HTML page, say): one line, bounded.
		e.Message = truncate(strings.Join(strings.Fields(string(body)), " "), maxPlainErrorMessage)
	}
	return e
}

// Pair redeems an operator's pairing code: POST {baseURL}/v1/provider/pair
// with {"code","name","services"}, expecting {"device_id","device_token"}. A
// refusal is an *APIError, a refused certificate a *CertError; the code
// is sent only to a server t verified. ctx bounds the request.
func Pair(ctx context.Context, t Transport, baseURL, code, name string, services []string) (Credentials, error) {
	base, err := parseServerURL(baseURL)
	if err != nil {
		return Credentials{}, err
	}
	if err := t.CheckURL("--server", base); err != nil {
		return Credentials{}, err
	}
	client, err := t.Client()
	if err != nil {
		return Credentials{}, err
	}
	body, _ := json.Marshal(map[string]any{"code": code, "name": name, "services": services})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint(base, "v1", "provider", "pair").String(), bytes.NewReader(body))
	if err != nil {
		return Credentials{}, fmt.Errorf("pair: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		if ce := certFailure(base.Host, err); ce != nil {
			return Credentials{}, ce
		}
		return Credentials{}, fmt.Errorf("pair: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return Credentials{}, fmt.Errorf("pair: %w", readAPIError(resp))
	}
	var reply struct {
		DeviceID    string `json:"device_id"`
		DeviceToken string `json:"device_token"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&reply); err != nil {
		return Credentials{}, fmt.Errorf("pair: decode reply: %w", err)
	}
	if reply.DeviceID == "" || reply.DeviceToken == "" {
		return Credentials{}, errors.New("pair: reply lacks device_id or device_token")
	}
	return Credentials{Server: base.String(), DeviceID: reply.DeviceID, DeviceToken: reply.DeviceToken}, nil
}

// SaveCredentials writes c to path as JSON with mode 0600, atomically: a
// temporary file in the same directory is written, synced and renamed over
// path, so a crash leaves the old file or the new one, never half of one.
// The directory is created 0700 when missing.
func SaveCredentials(path string, c Credentials) (err error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("save credentials: %w", err)
	}
	data, _ := json.MarshalIndent(c, "", "  ")
	tmp, err := os.CreateTemp(dir, ".device-*.json")
	if err != nil {
		return fmt.Errorf("save credentials: %w", err)
	}
	defer func() {
		if err != nil {
			_ = os.Remove(tmp.Name())
		}
	}()
	// CreateTemp already uses 0600; Chmod states it rather than relying on it.
	if err := tmp.Chmod(0o600); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("save credentials: %w", err)
	}
	if _, err := tmp.Write(append(data, '\n')); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("save credentials: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("save credentials: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("save credentials: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("save credentials: %w", err)
	}
	return nil
}

// LoadCredentials reads credentials written by SaveCredentials. It refuses a
// file that group or other may access, as ssh does for private keys: a token
// others could read must be treated as leaked.
func LoadCredentials(path string) (Credentials, error) {
	var c Credentials
	f, err := os.Open(path)
	if err != nil {
		return c, fmt.Errorf("load credentials: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return c, fmt.Errorf("load credentials: %w", err)
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return c, fmt.Errorf("load credentials: %s has mode %04o, so group or other may read the device token; "+
			"run `chmod 600 %s` (and consider re-pairing if others could read it)", path, perm, path)
	}
	if err := json.NewDecoder(io.LimitReader(f, 1<<20)).Decode(&c); err != nil {
		return c, fmt.Errorf("load credentials: %s: %w", path, err)
	}
	if c.Server == "" || c.DeviceID == "" || c.DeviceToken == "" {
		return Credentials{}, fmt.Errorf("load credentials: %s lacks server, device_id or device_token", path)
	}
	return c, nil
}
