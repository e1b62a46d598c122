package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPairRedeemsCode(t *testing.T) {
	t.Parallel()
	var got map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.Equal(t, http.MethodPost, r.Method)
		require.Equal(t, "/prefix/v1/provider/pair", r.URL.Path)
		require.Equal(t, "application/json", r.Header.Get("Content-Type"))
		require.NoError(t, json.NewDecoder(r.Body).Decode(&got))
		fmt.Fprint(w, `{"device_id":"dev-42","device_token":"secret-device-token"}`)
	}))
	t.Cleanup(srv.Close)

	c, err := Pair(context.Background(), Transport{}, srv.URL+"/prefix", "ABCD-1234", "studio-mac", []string{"synthetic.mp4"})
	require.NoError(t, err)
	require.Equal(t, Credentials{Server: srv.URL + "/prefix", DeviceID: "dev-42", DeviceToken: "secret-device-token"}, c)
	require.Equal(t, map[string]any{"code": "ABCD-1234", "name": "studio-mac", "services": []any{"synthetic.mp4"}}, got)
}

func TestPairSurfacesServerErrors(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeAPIError(w, http.StatusNotFound, "invalid_pairing_code", "unknown, used or expired pairing code")
	}))
	t.Cleanup(srv.Close)

	_, err := Pair(context.Background(), Transport{}, srv.URL, "WRONG", "mac", []string{"synthetic.mp4"})
	var ae *APIError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, APIError{Status: 404, Code: "invalid_pairing_code", Message: "unknown, used or expired pairing code"}, *ae)
	require.ErrorContains(t, err, "404 invalid_pairing_code (unknown, used or expired pairing code)")

	_, err = Pair(context.Background(), Transport{}, srv.URL+"/?x=1", "X", "mac", nil)
	require.ErrorContains(t, err, "query", "a base URL with a query is refused up front")

	// Not the JSON error shape (a proxy's page): status and body still shown.
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "upstream down", http.StatusBadGateway)
	}))
	t.Cleanup(plain.Close)
	_, err = Pair(context.Background(), Transport{}, plain.URL, "X", "mac", nil)
	require.ErrorAs(t, err, &ae)
	require.Equal(t, http.StatusBadGateway, ae.Status)
	require.ErrorContains(t, err, "502 Bad Gateway: upstream down")
}

func TestCredentialsFileIsPrivateAndAtomic(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "rendermac")
	path := filepath.Join(dir, "device.json")
	c := Credentials{Server: "https://rm.example", DeviceID: "dev-1", DeviceToken: "tok-secret"}
	require.NoError(t, SaveCredentials(path, c))

	st, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	dst, err := os.Stat(dir)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), dst.Mode().Perm())
	got, err := LoadCredentials(path)
	require.NoError(t, err)
	require.Equal(t, c, got)

	// Overwriting replaces the file whole and leaves no temporary behind.
	c2 := Credentials{Server: "https://rm.example", DeviceID: "dev-2", DeviceToken: "tok-2"}
	require.NoError(t, SaveCredentials(path, c2))
	got, err = LoadCredentials(path)
	require.NoError(t, err)
	require.Equal(t, c2, got)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1)
}

func TestLoadCredentialsRefusesReadableFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "device.json")
	require.NoError(t, SaveCredentials(path, Credentials{Server: "https://rm.example", DeviceID: "d", DeviceToken: "tok-secret"}))
	for _, mode := range []os.FileMode{0o644, 0o640, 0o604, 0o660} {
		require.NoError(t, os.Chmod(path, mode))
		_, err := LoadCredentials(path)
		require.ErrorContains(t, err, fmt.Sprintf("mode %04o", mode))
		require.ErrorContains(t, err, "chmod 600")
		require.NotContains(t, err.Error(), "tok-secret")
	}
	require.NoError(t, os.Chmod(path, 0o400))
	_, err := LoadCredentials(path)
	require.NoError(t, err, "owner-only read is fine")

	require.NoError(t, os.WriteFile(path, []byte(`{"server":"https://rm.example"}`), 0o600))
	_, err = LoadCredentials(path)
	require.ErrorContains(t, err, "lacks")
}

func TestCredentialsNeverPrintTheToken(t *testing.T) {
	t.Parallel()
	c := Credentials{Server: "https://rm.example", DeviceID: "dev-1", DeviceToken: "tok-secret"}
	require.NotContains(t, fmt.Sprintf("%v %s %+v %#v", c, c, c, c), "tok-secret")
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("paired", "creds", c)
	require.NotContains(t, buf.String(), "tok-secret")
	require.Contains(t, buf.String(), "dev-1")
}
