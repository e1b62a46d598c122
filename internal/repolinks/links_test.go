package repolinks

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// root is the repository root: two levels up from this package.
func root(t *testing.T) string {
	t.Helper()
	r, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	return r
}

// files lists the tracked files (git ls-files), else every file under the
// root but .git, so the check also runs on an exported tree.
func files(t *testing.T, r string) []string {
	t.Helper()
	if out, err := exec.Command("git", "-C", r, "ls-files", "-z").Output(); err == nil && len(out) > 0 {
		var fs []string
		for _, f := range bytes.Split(bytes.TrimRight(out, "\x00"), []byte{0}) {
			if _, err := os.Stat(filepath.Join(r, string(f))); err == nil { // deleted in the work tree
				fs = append(fs, string(f))
			}
		}
		return fs
	}
	var fs []string
	require.NoError(t, filepath.WalkDir(r, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(r, p)
			fs = append(fs, rel)
		}
		return nil
	}))
	return fs
}

func TestContractLivesInTheRepo(t *testing.T) {
	r := root(t)
	spec, err := os.ReadFile(filepath.Join(r, "docs", "SPEC.md"))
	require.NoError(t, err, "docs/SPEC.md is the contract and must be in the repo")
	require.Contains(t, string(spec), "## 4. Invariants")
	readme, err := os.ReadFile(filepath.Join(r, "README.md"))
	require.NoError(t, err)
	require.True(t, strings.Contains(string(readme), "(docs/SPEC.md)"), "the README must link the contract, docs/SPEC.md")
}

// readmeMaxLines bounds README.md: a front door (what it is, the quick
// start, set-up, a map, links); reference text goes under docs/.
const readmeMaxLines = 200

func TestReadmeIsAFrontDoor(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(root(t), "README.md"))
	require.NoError(t, err)
	n := bytes.Count(readme, []byte("\n"))
	require.Less(t, n, readmeMaxLines, "README.md has %d lines: move reference text to a file under docs/ and link it", n)
}

// Nothing in the repo points at the workspace it was developed in.
func TestNoFilePointsOutsideTheRepo(t *testing.T) {
	r := root(t)
	outside := []string{".." + "/shared", "/work" + "/"}
	for _, f := range files(t, r) {
		data, err := os.ReadFile(filepath.Join(r, f))
		require.NoError(t, err)
		if bytes.IndexByte(data, 0) >= 0 {
			continue // binary
		}
		for _, o := range outside {
			require.False(t, bytes.Contains(data, []byte(o)), "%s points outside the repository (%q)", f, o)
		}
	}
}

var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// Every relative link in a Markdown file resolves to a file inside the repo.
func TestMarkdownLinksResolveInsideTheRepo(t *testing.T) {
	r := root(t)
	checked := 0
	for _, f := range files(t, r) {
		if !strings.HasSuffix(f, ".md") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(r, f))
		require.NoError(t, err)
		for _, m := range mdLink.FindAllStringSubmatch(string(data), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") || strings.HasPrefix(target, "#") {
				continue
			}
			target, _, _ = strings.Cut(target, "#")
			abs := filepath.Clean(filepath.Join(r, filepath.Dir(f), target))
			rel, err := filepath.Rel(r, abs)
			require.NoError(t, err)
			require.False(t, rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)),
				"%s links %s, outside the repository", f, m[1])
			_, err = os.Stat(abs)
			require.NoError(t, err, "%s links %s, which does not exist", f, m[1])
			checked++
		}
	}
	require.Positive(t, checked, "no Markdown link was checked")
}
