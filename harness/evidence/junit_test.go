package evidence

import (
	"bytes"
	"encoding/xml"
	"testing"

	"github.com/stretchr/testify/require"
)

// junitDoc is an independent reading of the schema, so the test does not
// just echo the writer's own types back.
type junitDoc struct {
	Tests    int `xml:"tests,attr"`
	Failures int `xml:"failures,attr"`
	Suites   []struct {
		Name     string `xml:"name,attr"`
		Tests    int    `xml:"tests,attr"`
		Failures int    `xml:"failures,attr"`
		Cases    []struct {
			Name    string `xml:"name,attr"`
			Failure *struct {
				Message string `xml:"message,attr"`
				Body    string `xml:",chardata"`
			} `xml:"failure"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

func renderJUnit(t *testing.T, c Card, o WriteOptions) (string, junitDoc) {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, WriteJUnit(&buf, c, o))
	var doc junitDoc
	require.NoError(t, xml.Unmarshal(buf.Bytes(), &doc))
	return buf.String(), doc
}

func TestJUnitFailures(t *testing.T) {
	t.Parallel()
	out, doc := renderJUnit(t, sampleCard(false), WriteOptions{})
	require.Equal(t, 4, doc.Tests)
	require.Equal(t, 2, doc.Failures)
	require.Len(t, doc.Suites, 2)
	require.Equal(t, "campaigns", doc.Suites[0].Name)
	require.Equal(t, "scenarios", doc.Suites[1].Name)
	failed := 0
	for _, s := range doc.Suites {
		for _, c := range s.Cases {
			if c.Failure != nil {
				failed++
			}
		}
	}
	require.Equal(t, doc.Failures, failed)
	fs := doc.Suites[0].Cases[1]
	require.Equal(t, "full-stack", fs.Name)
	require.Contains(t, fs.Failure.Message, "step 17: model NOT_LEASE_HOLDER")
	require.Contains(t, fs.Failure.Body, "replay: rendermac fuzz --target stack --seed 257 --steps 40")
	require.Nil(t, doc.Suites[0].Cases[0].Failure)
	require.Contains(t, out, `time="41.500"`)
}

func TestJUnitFailureWithoutRecordAndOrphans(t *testing.T) {
	t.Parallel()
	c := sampleCard(false)
	c.Failures = []Failure{{Source: "setup", Detail: "Postgres did not start", Replay: "rendermac qualify"}}
	_, doc := renderJUnit(t, c, WriteOptions{})
	require.Equal(t, 3, doc.Failures, "two failing items plus the orphan")
	require.Len(t, doc.Suites, 3)
	require.Equal(t, "other", doc.Suites[2].Name)
	require.Contains(t, doc.Suites[0].Cases[1].Failure.Message, "campaign failed: 1 divergences")
}

func TestJUnitNoTimings(t *testing.T) {
	t.Parallel()
	out, _ := renderJUnit(t, sampleCard(false), WriteOptions{NoTimings: true})
	require.NotContains(t, out, "time=")
	out2, _ := renderJUnit(t, sampleCard(true), WriteOptions{NoTimings: true})
	require.Equal(t, out, out2)
}
