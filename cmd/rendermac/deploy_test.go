package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/rendermac/rendermac/server/artifact"
)

// serverHelpFlags returns the flag names `rendermac server --help` prints.
func serverHelpFlags(t *testing.T) map[string]bool {
	t.Helper()
	var stderr bytes.Buffer
	_, err := parseServerFlags([]string{"--help"}, &stderr)
	var help helpError // the usage run prints on stdout
	require.ErrorAs(t, err, &help)
	require.ErrorIs(t, err, flag.ErrHelp)
	require.Empty(t, stderr.String())
	names := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^  -([a-z][a-z0-9-]*)`).FindAllStringSubmatch(help.usage, -1) {
		names[m[1]] = true
	}
	require.Contains(t, names, "log-format")
	return names
}

// checkServerCommand parses args (after "server") with the server's own
// flag parser, env being the environment the deployment gives it, and
// checks every flag named is in --help and the deployment logs JSON.
func checkServerCommand(t *testing.T, where string, args []string, env map[string]string) serverFlags {
	t.Helper()
	for _, name := range []string{"DATABASE_URL", "RENDERMAC_ARTIFACTS", "RENDERMAC_SIGNING_KEY_FILE", "RENDERMAC_LOG_FORMAT", "RENDERMAC_PUBLIC_URL"} {
		t.Setenv(name, env[name])
	}
	help := serverHelpFlags(t)
	for _, a := range args {
		if name, ok := strings.CutPrefix(a, "--"); ok {
			name, _, _ = strings.Cut(name, "=")
			require.True(t, help[name], "%s: --%s is not in `rendermac server --help`", where, name)
		}
	}
	f, err := parseServerFlags(args, io.Discard)
	require.NoError(t, err, "%s: rendermac server %v", where, args)
	require.Equal(t, "json", f.logFormat, "%s: deployments log JSON", where)
	require.NotEmpty(t, f.db, "%s: the database comes from --db or DATABASE_URL", where)
	return f
}

// unitKeys reads a systemd unit: section.key -> values in order.
func unitKeys(t *testing.T, path string) map[string][]string {
	t.Helper()
	fh, err := os.Open(path)
	require.NoError(t, err)
	defer fh.Close()
	keys := map[string][]string{}
	section := ""
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "["):
			section = strings.Trim(line, "[]")
		default:
			k, v, ok := strings.Cut(line, "=")
			require.True(t, ok, "unit line %q", line)
			keys[section+"."+k] = append(keys[section+"."+k], v)
		}
	}
	require.NoError(t, sc.Err())
	return keys
}

// readEnvFile reads KEY=VALUE lines (comments and blanks skipped).
func readEnvFile(t *testing.T, path string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	env := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		if line = strings.TrimSpace(line); line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		require.True(t, ok, "%s: %q", path, line)
		env[k] = v
	}
	return env
}

// deploy/rendermac-server.service: systemd-analyze verify finds nothing to
// say (where it is installed), and ExecStart runs `rendermac server` with
// flags the server accepts, its database from the documented env file and
// its key from the credential the unit loads.
func TestDeploySystemdUnit(t *testing.T) {
	const path = "../../deploy/rendermac-server.service"
	keys := unitKeys(t, path)
	exec1 := keys["Service.ExecStart"]
	require.Len(t, exec1, 1)
	words := strings.Fields(exec1[0])
	require.Equal(t, []string{"/usr/local/bin/rendermac", "server"}, words[:2])
	stateDir, credDir := "/var/lib/rendermac", "/run/credentials/rendermac-server.service"
	require.Equal(t, []string{"rendermac"}, keys["Service.StateDirectory"])
	args := make([]string, 0, len(words)-2)
	for _, w := range words[2:] {
		args = append(args, strings.NewReplacer("${STATE_DIRECTORY}", stateDir, "${CREDENTIALS_DIRECTORY}", credDir).Replace(w))
	}
	require.Equal(t, []string{"/etc/rendermac/server.env"}, keys["Service.EnvironmentFile"])
	f := checkServerCommand(t, path, args, readEnvFile(t, "../../deploy/server.env.example"))
	require.Equal(t, stateDir+"/artifacts", f.artifacts)
	cred, src, ok := strings.Cut(keys["Service.LoadCredential"][0], ":")
	require.True(t, ok)
	require.Equal(t, credDir+"/"+cred, f.keyFile, "the key is the credential the unit loads")
	require.Equal(t, "/etc/rendermac/signing.key", src)
	// TLS from the certificate credentials the unit loads; SIGHUP reloads.
	creds := map[string]string{}
	for _, c := range keys["Service.LoadCredential"] {
		name, from, _ := strings.Cut(c, ":")
		creds[credDir+"/"+name] = from
	}
	require.Equal(t, "/etc/rendermac/tls.crt", creds[f.tls.CertFile], "--tls-cert is a credential")
	require.Equal(t, "/etc/rendermac/tls.key", creds[f.tls.KeyFile], "--tls-key is a credential")
	require.Equal(t, []string{"/bin/kill -HUP $MAINPID"}, keys["Service.ExecReload"])
	require.Equal(t, []string{"multi-user.target"}, keys["Install.WantedBy"])

	tool, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Logf("systemd-analyze not installed: the unit was parsed, not verified")
		return
	}
	// verify wants ExecStart's program to exist: point it at a real one.
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	copyPath := filepath.Join(t.TempDir(), "rendermac-server.service")
	require.NoError(t, os.WriteFile(copyPath, bytes.ReplaceAll(data, []byte("/usr/local/bin/rendermac"), []byte("/bin/true")), 0o644))
	out, err := exec.Command(tool, "verify", copyPath).CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Empty(t, string(out), "systemd-analyze verify warns (it exits 0 on unknown keys)")
}

// dockerfile is the instructions of a Dockerfile: keyword and the rest,
// continuation lines joined.
func dockerfile(t *testing.T, path string) [][2]string {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var out [][2]string
	joined := strings.ReplaceAll(string(data), "\\\n", " ")
	for _, line := range strings.Split(joined, "\n") {
		if line = strings.TrimSpace(line); line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		kw, rest, _ := strings.Cut(line, " ")
		out = append(out, [2]string{strings.ToUpper(kw), strings.TrimSpace(rest)})
	}
	return out
}

// deploy/Dockerfile builds the shipped binary (no build tags: no fault
// points, no variants, no Docker client) and runs `rendermac server` with
// flags the server accepts; deploy/compose.yaml starts Postgres, the
// server (the same command, its database the postgres service) and an
// object store over the artifact volume.
func TestDeployDockerfileAndCompose(t *testing.T) {
	var entry, cmd []string
	builds := 0
	for _, ins := range dockerfile(t, "../../deploy/Dockerfile") {
		switch ins[0] {
		case "RUN":
			for _, call := range shellCalls(t, ins[1]) {
				if len(call) >= 2 && call[0] == "go" && call[1] == "build" {
					builds++
					require.NotContains(t, strings.Join(call, " "), "-tags", "the image ships the untagged build")
					require.Equal(t, "./cmd/rendermac", call[len(call)-1])
				}
			}
		case "ENTRYPOINT":
			require.NoError(t, json.Unmarshal([]byte(ins[1]), &entry), "exec form")
		case "CMD":
			require.NoError(t, json.Unmarshal([]byte(ins[1]), &cmd), "exec form")
		}
	}
	require.Equal(t, 1, builds)
	require.Equal(t, []string{"/usr/local/bin/rendermac"}, entry)
	require.Equal(t, "server", cmd[0])

	data, err := os.ReadFile("../../deploy/compose.yaml")
	require.NoError(t, err)
	var c struct {
		Name     string                    `yaml:"name"`
		Services map[string]composeService `yaml:"services"`
		Volumes  map[string]any            `yaml:"volumes"`
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	require.NoError(t, dec.Decode(&c))
	for _, name := range []string{"postgres", "keygen", "server", "objectstore"} {
		require.Contains(t, c.Services, name)
	}
	for name, svc := range c.Services {
		for _, v := range svc.Volumes {
			vol, _, _ := strings.Cut(v, ":")
			require.Contains(t, c.Volumes, vol, "service %s mounts an undeclared volume", name)
		}
	}
	srv := c.Services["server"]
	require.Equal(t, c.Services["keygen"].Image, srv.Image)
	require.Equal(t, "deploy/Dockerfile", c.Services["keygen"].Build.Dockerfile)
	require.Equal(t, cmd[0], srv.Command[0])
	f := checkServerCommand(t, "compose server", composeDefaults(srv.Command[1:]), srv.Environment)
	// Compose runs the image's server with its artifacts on S3 instead of
	// the image's directory; the rest is the Dockerfile's command.
	image := checkServerCommand(t, "Dockerfile", cmd[1:], map[string]string{"DATABASE_URL": "postgres://x"})
	require.Equal(t, []string{image.listen, image.keyFile, image.logFormat}, []string{f.listen, f.keyFile, f.logFormat},
		"compose runs the Dockerfile's listen address, key file and log format")
	require.Contains(t, f.db, "@postgres:5432/", "the server's database is the postgres service")
	require.Equal(t, "service_healthy", srv.DependsOn["postgres"].Condition)
	require.Equal(t, "service_completed_successfully", srv.DependsOn["keygen"].Condition)
	require.Contains(t, srv.Volumes, "keys:"+filepath.Dir(f.keyFile))
	require.NotEmpty(t, f.metricsListen, "/metrics reachable from the compose network")
	// Compose terminates TLS in the server itself, over ACME, its cache
	// in a volume; the image's default serves mounted certificate files.
	require.NotEmpty(t, f.tls.ACME.Domains, "compose serves TLS with an ACME certificate")
	require.Contains(t, srv.Volumes, "state:"+f.stateDir, "the ACME cache outlives the container")
	require.Contains(t, srv.Ports, "443:"+strings.TrimPrefix(f.listen, "0.0.0.0:"), "the CA reaches TLS-ALPN-01 on 443")
	require.False(t, f.insecurePlaintext)
	require.NotEmpty(t, image.tls.CertFile, "the image serves TLS from mounted files")

	// keygen writes the key the server reads, once.
	kg := c.Services["keygen"]
	require.Len(t, kg.Command, 1)
	gens := 0
	for _, call := range shellCalls(t, kg.Command[0]) {
		if sub, args, _ := rendermacCall(t, call); sub == "admin" {
			require.Equal(t, []string{"gen-key", f.keyFile}, args)
			gens++
		}
	}
	require.Equal(t, 1, gens)

	// The server's artifacts are a bucket of the object store: the bucket
	// is the artifacts volume (a directory under versitygw's posix root),
	// the endpoint its published port, the credentials its root keys.
	obj := c.Services["objectstore"]
	s3cfg, err := artifact.ParseS3URL(f.artifacts)
	require.NoError(t, err, "the compose server stores artifacts on S3")
	require.Equal(t, "posix", obj.Command[len(obj.Command)-2])
	require.Contains(t, obj.Volumes, "artifacts:"+obj.Command[len(obj.Command)-1]+"/"+s3cfg.Bucket, "the bucket is the artifacts volume")
	require.True(t, f.s3PathStyle, "versitygw wants path-style addressing")
	endpoint, err := url.Parse(f.s3Endpoint)
	require.NoError(t, err)
	port := endpoint.Port()
	require.Equal(t, []string{"--port", ":" + port}, obj.Command[:2], "the endpoint is the object store's port")
	require.Contains(t, obj.Ports, port+":"+port, "Macs reach the endpoint: the port is published")
	require.Contains(t, srv.ExtraHosts, endpoint.Hostname()+":host-gateway", "the server reaches the default endpoint too")
	require.Equal(t, obj.Environment["ROOT_ACCESS_KEY"], srv.Environment["AWS_ACCESS_KEY_ID"])
	require.Equal(t, obj.Environment["ROOT_SECRET_KEY"], srv.Environment["AWS_SECRET_ACCESS_KEY"])
	require.NotEmpty(t, srv.Environment["AWS_REGION"])
	require.Equal(t, "service_started", srv.DependsOn["objectstore"].Condition)
}

// composeDefaults replaces compose's ${VAR:-default} in args by its
// default, as `docker compose` does when VAR is unset.
func composeDefaults(args []string) []string {
	out := slices.Clone(args)
	for i, a := range out {
		if inner, ok := strings.CutPrefix(a, "${"); ok && strings.HasSuffix(inner, "}") {
			if _, def, ok := strings.Cut(strings.TrimSuffix(inner, "}"), ":-"); ok {
				out[i] = def
			}
		}
	}
	return out
}

type composeService struct {
	Image string `yaml:"image"`
	Build struct {
		Context    string `yaml:"context"`
		Dockerfile string `yaml:"dockerfile"`
	} `yaml:"build"`
	Entrypoint  []string          `yaml:"entrypoint"`
	Command     []string          `yaml:"command"`
	Environment map[string]string `yaml:"environment"`
	DependsOn   map[string]struct {
		Condition string `yaml:"condition"`
	} `yaml:"depends_on"`
	Healthcheck map[string]any `yaml:"healthcheck"`
	Ports       []string       `yaml:"ports"`
	ExtraHosts  []string       `yaml:"extra_hosts"`
	Volumes     []string       `yaml:"volumes"`
	Restart     string         `yaml:"restart"`
}
