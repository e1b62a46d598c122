package protocol

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// CreateJobFields is read from the contract itself, not from an
// implementation: a wrong table would otherwise hold the model, the server
// and the API to the same wrong order, invisible to a differential run.
func TestCreateJobFieldsFollowSemantics(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../docs/semantics.md")
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(doc), "\n## CreateJob(")
	require.True(t, ok, "docs/semantics.md has no CreateJob section")
	_, step1, ok := strings.Cut(section, "\n1. Validation, in this order")
	require.True(t, ok, "CreateJob's step 1 no longer pins a validation order")
	step1, _, ok = strings.Cut(step1, "\n2. ")
	require.True(t, ok)
	// Each check reads "... -> `field`", or "-> `not_found` (Field `buyer`)".
	check := regexp.MustCompile("-> `([a-z0-9_.]+)`(?: \\(Field `([a-z0-9_.]+)`\\))?")
	var fields []string
	for _, m := range check.FindAllStringSubmatch(step1, -1) {
		if m[2] != "" {
			fields = append(fields, m[2])
		} else {
			fields = append(fields, m[1])
		}
	}
	require.Equal(t, CreateJobFields, fields, "the order docs/semantics.md pins for CreateJob")
}
