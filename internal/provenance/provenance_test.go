package provenance

import (
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"
)

func TestSourceVersionFollowsTheSourcesNotTheTests(t *testing.T) {
	src := fstest.MapFS{"a.go": {Data: []byte("package a")}, "a_test.go": {Data: []byte("package a // test")}}
	v := SourceVersion(3, src)
	require.Regexp(t, `^3\+[0-9a-f]{12}$`, v)
	src["a_test.go"] = &fstest.MapFile{Data: []byte("package a // another test")}
	require.Equal(t, v, SourceVersion(3, src), "a test file changed the version")
	src["a.go"] = &fstest.MapFile{Data: []byte("package a // a rule changed")}
	require.NotEqual(t, v, SourceVersion(3, src))
	require.NotEqual(t, SourceVersion(3, src), SourceVersion(4, src))
}

func TestMismatchNamesEveryDifference(t *testing.T) {
	cur := Build{Commit: "abc", SchemaVersion: 2, ModelVersion: "1+m", GeneratorVersion: "1+g"}
	require.Empty(t, Mismatch(cur, cur))
	rec := cur
	rec.Commit, rec.SchemaVersion = "def", 1
	require.Equal(t, []string{"commit: recorded def, this build abc", "schema version: recorded 1, this build 2"},
		Mismatch(rec, cur))
	require.Equal(t, []string{"commit: recorded (not recorded), this build abc", "schema version: recorded (not recorded), this build 2",
		"model version: recorded (not recorded), this build 1+m", "generator version: recorded (not recorded), this build 1+g"},
		Mismatch(Build{}, cur))
	require.Empty(t, DirtyNote(cur, cur))
	rec = cur
	rec.Dirty = true
	require.Contains(t, DirtyNote(rec, cur), "recorded dirty=true")
}
