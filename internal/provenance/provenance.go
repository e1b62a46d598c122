// Package provenance says which build produced a result: the commit (and
// whether the tree was dirty), the Go toolchain, and the versions of the
// schema, the model and the generator, so that a card or replay file made
// by another build is recognised before it is trusted. It is a pure leaf
// (no I/O beyond the fs.FS it is handed): sim and faults hash their sources
// through it, and reading the commit from git lives in internal/vcsstamp.
package provenance

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"runtime"
	"slices"
	"strconv"
	"strings"
)

// Build is the provenance recorded on every card and replay file.
type Build struct {
	Commit           string `json:"commit"`
	Dirty            bool   `json:"dirty"`
	GoVersion        string `json:"go_version"`
	SchemaVersion    int64  `json:"schema_version"`
	ModelVersion     string `json:"model_version"`
	GeneratorVersion string `json:"generator_version"`
}

// SourceVersion is "<rules>+<12 hex digits>": a hand-kept rules number and
// the SHA-256 of the non-test .go files of src (a package's go:embed of
// its own sources), so an edit nobody bumped the number for still shows.
func SourceVersion(rules int, src fs.FS) string {
	names, _ := fs.Glob(src, "*.go")
	slices.Sort(names)
	h := sha256.New()
	for _, n := range names {
		if strings.HasSuffix(n, "_test.go") {
			continue
		}
		data, err := fs.ReadFile(src, n)
		if err != nil {
			continue
		}
		h.Write([]byte(n))
		h.Write([]byte{0})
		h.Write(data)
		h.Write([]byte{0})
	}
	return strconv.Itoa(rules) + "+" + hex.EncodeToString(h.Sum(nil))[:12]
}

// Current is this build's provenance: the commit and dirty flag the
// caller read (internal/vcsstamp), this toolchain, and the versions only
// the caller's imports know.
func Current(commit string, dirty bool, schema int64, model, generator string) Build {
	return Build{Commit: commit, Dirty: dirty, GoVersion: runtime.Version(), SchemaVersion: schema,
		ModelVersion: model, GeneratorVersion: generator}
}

// Mismatch lists, one line each, what makes a result recorded by rec not
// the result this build would give: another commit, schema, model or
// generator (a value not recorded counts as different). Nil means the same
// build, as far as the commit pins it: see DirtyNote.
func Mismatch(rec, cur Build) []string {
	var out []string
	diff := func(what, a, b string) {
		if a == "" {
			a = "(not recorded)"
		}
		if a != b {
			out = append(out, fmt.Sprintf("%s: recorded %s, this build %s", what, a, b))
		}
	}
	diff("commit", rec.Commit, cur.Commit)
	diff("schema version", schemaString(rec.SchemaVersion), schemaString(cur.SchemaVersion))
	diff("model version", rec.ModelVersion, cur.ModelVersion)
	diff("generator version", rec.GeneratorVersion, cur.GeneratorVersion)
	return out
}

// DirtyNote warns when either side had uncommitted changes: the commit then
// does not pin the code (the model and generator hashes still do, for
// theirs). "" when both trees were clean.
func DirtyNote(rec, cur Build) string {
	if !rec.Dirty && !cur.Dirty {
		return ""
	}
	return fmt.Sprintf("note: uncommitted changes (recorded dirty=%t, this build dirty=%t): commit %s does not pin the code",
		rec.Dirty, cur.Dirty, short(cur.Commit))
}

func schemaString(v int64) string {
	if v == 0 {
		return ""
	}
	return strconv.FormatInt(v, 10)
}

func short(c string) string { return c[:min(len(c), 12)] }
