package archtest

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// architectureDoc holds the import table between its markers, written from
// Layers, Reaches, Product, Harness and TestClients: the document and the
// test that enforces it cannot disagree.
const architectureDoc = "../../docs/architecture.md"

const (
	tableBegin         = "<!-- BEGIN import table: generated from internal/archtest; do not edit. Regenerate with:\n     "
	tableEnd           = "<!-- END import table -->"
	regenerateArchDoc  = "go test ./internal/archtest/ -run TestArchitectureDocHasTheImportTable -update"
	tableBeginComplete = tableBegin + regenerateArchDoc + " -->"
)

var updateArchDoc = flag.Bool("update", false, "rewrite the import table in docs/architecture.md")

func code(pkgs []string) string {
	out := make([]string, len(pkgs))
	for i, p := range pkgs {
		out[i] = "`" + strings.TrimPrefix(p, Module+"/") + "`"
		if p == "..." {
			out[i] = "every package"
		}
	}
	return strings.Join(out, ", ")
}

// importTable renders the table as Markdown.
func importTable() string {
	var b strings.Builder
	b.WriteString("| package | may import (project packages) | why |\n|---|---|---|\n")
	for _, l := range Layers {
		may := code(l.May)
		switch {
		case len(l.May) == 0:
			may = "nothing: the standard library only"
		case len(l.May) == 1 && l.May[0] == "...":
			may = "anything (nothing imports it)"
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", code(l.Pkgs), may, l.Why)
	}
	b.WriteString("\nWhat a package may not reach at all, directly or through any import:\n\n")
	b.WriteString("| packages | never depend on | why |\n|---|---|---|\n")
	for _, r := range Reaches {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", code(r.Pkgs), code(r.Deps), r.Why)
	}
	fmt.Fprintf(&b, "\nThe product is %s. Its tests never link %s, except %s (the device's side of the wire, "+
		"which a gateway test needs as a peer).\n", code(Product), code(Harness), code(TestClients))
	return b.String()
}

// docs/architecture.md's import table is the one this package enforces: a
// row changed in table.go without regenerating the document fails here
// with the command that does.
func TestArchitectureDocHasTheImportTable(t *testing.T) {
	data, err := os.ReadFile(architectureDoc)
	require.NoError(t, err)
	doc := string(data)
	i, j := strings.Index(doc, tableBegin), strings.Index(doc, tableEnd)
	require.True(t, i >= 0 && j > i, "docs/architecture.md has no import table between %q and %q", tableBegin, tableEnd)
	want := doc[:i] + tableBeginComplete + "\n\n" + importTable() + "\n" + doc[j:]
	if *updateArchDoc {
		require.NoError(t, os.WriteFile(architectureDoc, []byte(want), 0o644))
		return
	}
	require.True(t, doc == want, "docs/architecture.md's import table is not internal/archtest's; regenerate it with:\n  %s", regenerateArchDoc)
}
