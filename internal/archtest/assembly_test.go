package archtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// assemblers are the constructors of a control plane's layers that only
// server/controlplane may call outside package tests: a stack wired
// anywhere else could differ from the one operators run.
var assemblers = map[string]string{
	Module + "/server/gateway": "New",
	Module + "/server/api":     "New",
}

// assemblyCalls names the calls of an assembler in one parsed file.
func assemblyCalls(fset *token.FileSet, f *ast.File) []string {
	var calls []string
	packageCalls(f, func(call *ast.CallExpr, local, path, fn string) {
		if assemblers[path] == fn {
			calls = append(calls, fmt.Sprintf("%s: %s.%s", fset.Position(call.Pos()), local, fn))
		}
	})
	return calls
}

// packageCalls calls visit for every call of another package's function in
// f (local.Fn(...)), with the name the file gives the package, its import
// path and the function's name.
func packageCalls(f *ast.File, visit func(call *ast.CallExpr, local, path, fn string)) {
	names := map[string]string{} // local import name -> path
	for _, im := range f.Imports {
		p, _ := strconv.Unquote(im.Path.Value)
		name := filepath.Base(p)
		if im.Name != nil {
			name = im.Name.Name
		}
		names[name] = p
	}
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if x, ok := sel.X.(*ast.Ident); ok {
			if p, ok := names[x.Name]; ok {
				visit(call, x.Name, p, sel.Sel.Name)
			}
		}
		return true
	})
}

// TestOneAssemblyPoint checks that the gateway and the API are built by
// controlplane.Assemble alone in every non-test file of the module, under
// the harness's tags (which see the most files).
func TestOneAssemblyPoint(t *testing.T) {
	cmd := exec.Command("go", "list", "-e", "-tags", "faultpoints,mutations", "-json=ImportPath,Dir,GoFiles", Module+"/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "go list: %s", stderr.String())
	fset := token.NewFileSet()
	var bad []string
	files := 0
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct {
			ImportPath, Dir string
			GoFiles         []string
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else {
			require.NoError(t, err)
		}
		if p.ImportPath == Module+"/server/controlplane" {
			continue
		}
		for _, name := range p.GoFiles {
			f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, 0)
			require.NoError(t, err)
			files++
			bad = append(bad, assemblyCalls(fset, f)...)
		}
	}
	require.Greater(t, files, 100, "the listing found too few files to mean anything")
	require.Empty(t, bad, "build the gateway and the API with controlplane.Assemble")
}

// TestAssemblyCallsAreNamed feeds the check a file that wires a gateway by
// hand (under a renamed import too), so that it is known to fail.
func TestAssemblyCallsAreNamed(t *testing.T) {
	src := `package stack
import (
	gw "github.com/rendermac/rendermac/server/gateway"
	"github.com/rendermac/rendermac/server/api"
	"github.com/rendermac/rendermac/server/grant"
)
func wire() {
	_ = gw.New(nil, nil, nil, nil, nil, gw.Config{})
	_ = api.New(nil, nil, nil, nil, nil, nil, api.Config{})
	_, _ = grant.NewSigner(nil, "")
}`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "stack.go", src, 0)
	require.NoError(t, err)
	require.Equal(t, []string{"stack.go:8:6: gw.New", "stack.go:9:6: api.New"}, assemblyCalls(fset, f))
}
