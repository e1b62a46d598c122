//go:build mutations

package fencing_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rendermac/rendermac/server/fencing"
	"github.com/rendermac/rendermac/server/gateway"
)

// The broken variants are compiled only with -tags mutations. This test runs
// in that build (it needs the variants' names) and inspects the default
// build from outside: its file set, and a binary built from it.

// variantNames are the service layer's and the gateway's variant names.
func variantNames() []string {
	var out []string
	for _, m := range fencing.Variants() {
		out = append(out, string(m))
	}
	for _, m := range gateway.Variants() {
		out = append(out, string(m))
	}
	return out
}

func goTool() string { return filepath.Join(runtime.GOROOT(), "bin", "go") }

// The default build's files of server and server/gateway name no variant:
// no variant_on.go, no Variant constant but VariantNone, no variant name.
func TestDefaultBuildFilesHaveNoVariants(t *testing.T) {
	require.Len(t, variantNames(), 16, "the tagged build lists every variant")
	out, err := exec.Command(goTool(), "list", "-f", `{{$d := .Dir}}{{range .GoFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}`,
		"github.com/rendermac/rendermac/server/fencing", "github.com/rendermac/rendermac/server/gateway").CombinedOutput()
	require.NoError(t, err, "%s", out)
	files := strings.Fields(string(out))
	require.NotEmpty(t, files)
	constRE := regexp.MustCompile(`\bVariant[A-Z]\w*`)
	for _, f := range files {
		require.NotEqual(t, "variant_on.go", filepath.Base(f), "the default build compiles the variants")
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, c := range constRE.FindAllString(string(src), -1) {
			require.Equal(t, "VariantNone", c, "%s names a variant constant in the default build", f)
		}
		for _, name := range variantNames() {
			require.False(t, strings.Contains(string(src), name), "%s names the variant %q in the default build", f, name)
		}
	}
}

// A rendermac binary built without tags carries none of the variants'
// names (their strings die with the branches), while the tagged binary
// does: the check can fail. Names that appear as data elsewhere do not
// count: sim's model variants share two with the service layer, and the
// embedded scenario catalogue lists in "broken-by:" lines which variant
// breaks a scenario.
func TestDefaultBinaryHasNoVariants(t *testing.T) {
	if testing.Short() {
		t.Skip("builds rendermac twice")
	}
	dir := t.TempDir()
	build := func(name string, tags ...string) []byte {
		path := filepath.Join(dir, name)
		args := append([]string{"build"}, tags...)
		cmd := exec.Command(goTool(), append(args, "-o", path, "github.com/rendermac/rendermac/cmd/rendermac")...)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		bin, err := os.ReadFile(path)
		require.NoError(t, err)
		return bin
	}
	plain := build("plain")
	tagged := build("tagged", "-tags", "mutations")
	var data []byte // the embedded catalogue, byte for byte as in the binary
	catalogue, err := filepath.Glob("../../harness/scenarios/testdata/scenarios/*.txt")
	require.NoError(t, err)
	require.NotEmpty(t, catalogue)
	for _, f := range catalogue {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		data = append(append(data, b...), 0)
	}
	sim := []string{"no_epoch_check", "commit_from_cancelling"} // also sim's model variants
	checked := 0
	for _, name := range variantNames() {
		if slices.Contains(sim, name) {
			continue
		}
		checked++
		n, inData := bytes.Count(plain, []byte(name)), bytes.Count(data, []byte(name))
		require.Equal(t, inData, n, "the default binary holds %q beyond the catalogue text", name)
		require.Greater(t, bytes.Count(tagged, []byte(name)), n, "the tagged binary holds %q no more often: the check proves nothing", name)
	}
	require.Equal(t, len(variantNames())-len(sim), checked)
	nm, err := exec.Command(goTool(), "tool", "nm", filepath.Join(dir, "plain")).CombinedOutput()
	require.NoError(t, err)
	for _, line := range strings.Split(string(nm), "\n") {
		require.NotRegexp(t, `server(/gateway)?\.variant\.|server(/gateway)?\.Variant[A-Z]`, line, "default binary symbol")
	}
}
