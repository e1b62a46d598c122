package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Bad input is refused before any request, naming what is wrong, with
// exit status 2.
func TestJobsBadInput(t *testing.T) {
	t.Setenv("RENDERMAC_API_KEY", "rmk_test")
	t.Setenv("RENDERMAC_SERVER", "")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"jobs", "frobnicate"}, `unknown jobs subcommand "frobnicate"`},
		{[]string{"jobs", "submit"}, "--service is required"},
		{[]string{"jobs", "submit", "--service", "s", "--param", "=v"}, `"=v" is not KEY=VALUE`},
		{[]string{"jobs", "submit", "--service", "s", "--param", "a=1", "--param", "a=2"}, "param a given twice"},
		{[]string{"jobs", "submit", "--service", "s", "--input", "/nonexistent/in.mp4"}, "--input: stat /nonexistent/in.mp4: no such file or directory"},
		{[]string{"jobs", "submit", "--service", "s", "--input", "/"}, "--input /: not a regular file"},
		{[]string{"jobs", "submit", "--service", "s", "--admission-window", "1500ms"}, "--admission-window 1.5s: want whole seconds"},
		{[]string{"jobs", "submit", "--service", "s", "extra"}, `submit takes no arguments, got ["extra"]`},
		{[]string{"jobs", "get"}, "want exactly one job id"},
		{[]string{"jobs", "get", "a", "b"}, "want exactly one job id"},
		{[]string{"jobs", "download", "a"}, "download: want JOB OUT"},
		{[]string{"jobs", "list", "--status", "done"}, `--status "done" is not a job status`},
		{[]string{"jobs", "get", "j", "-o", "yaml"}, `-o "yaml": want text or json`},
		{[]string{"jobs", "get", "j", "--server", "ftp://x"}, `--server "ftp://x": want http://HOST:PORT`},
		{[]string{"jobs", "get", "j", "--server", "http://render.example.com"}, "refusing plain http to render.example.com"},
		{[]string{"jobs", "get", "j", "--ca-file", "/nonexistent.pem"}, "--ca-file"},
	} {
		code, stdout, stderr := cli(t, tc.args...)
		name := strings.Join(tc.args, " ")
		require.Equal(t, 2, code, "rendermac %s: %s", name, stderr)
		require.Empty(t, stdout, name)
		require.Contains(t, stderr, tc.want, name)
	}
	t.Setenv("RENDERMAC_API_KEY", "")
	code, _, stderr := cli(t, "jobs", "get", "j")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "no API key: set RENDERMAC_API_KEY or pass --api-key")
}

// A refusal of the API exits 1 with its status, code and message; -o json
// prints the API's body as JSON; the key goes as a bearer token, from the
// flag before the environment.
func TestJobsAgainstAnAPI(t *testing.T) {
	t.Setenv("RENDERMAC_API_KEY", "rmk_env")
	var auth string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth = r.Header.Get("Authorization")
		switch r.URL.Path {
		case "/v1/jobs/j1":
			_, _ = w.Write([]byte(`{"id":"j1","status":"failed","service":"s","failure_code":"runner_failed","attempts":[` +
				`{"id":"a1","number":1,"status":"failed","failure_code":"runner_failed","failure_message":"ffmpeg: exit status 1"}]}`))
		default:
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"code":"not_found","message":"no such job"}`))
		}
	}))
	defer srv.Close()

	code, stdout, stderr := cli(t, "jobs", "get", "j1", "--server", srv.URL, "-o", "json")
	require.Equal(t, 0, code, stderr)
	require.Equal(t, "Bearer rmk_env", auth)
	var d map[string]any
	require.NoError(t, json.Unmarshal([]byte(stdout), &d))
	require.Equal(t, "failed", d["status"])

	code, _, stderr = cli(t, "jobs", "wait", "j1", "--server", srv.URL, "--api-key", "rmk_flag")
	require.Equal(t, 1, code)
	require.Equal(t, "Bearer rmk_flag", auth)
	require.Contains(t, stderr, "job j1 failed: runner_failed: ffmpeg: exit status 1")

	code, _, stderr = cli(t, "jobs", "cancel", "j2", "--server", srv.URL)
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "POST /v1/jobs/j2/cancel: HTTP 404 not_found: no such job")

	code, _, stderr = cli(t, "jobs", "download", "j1", t.TempDir()+"/out.mp4", "--server", srv.URL)
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "job j1 is failed: it has no output to download")
}
