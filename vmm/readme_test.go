package vmm_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"
)

// The README's library example is the body of Example (example_test.go) as it is, less its
// Output comment and one level of indentation, between the markers below: the example the
// README shows is compiled and run by the tests.
const (
	readmeBegin = "<!-- begin: vmm/example_test.go Example -->"
	readmeEnd   = "<!-- end: vmm/example_test.go Example -->"
)

func TestReadmeExample(t *testing.T) {
	want, err := exampleBody("example_test.go", "Example")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	got, err := readmeBlock(string(readme))
	if err != nil {
		t.Fatal(err)
	}
	if got == want {
		return
	}
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < max(len(g), len(w)); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			t.Errorf("README.md's example differs from Example in example_test.go at line %d of the block:\nREADME:  %q\nExample: %q", i+1, gl, wl)
			break
		}
	}
	t.Errorf("the block between %s and %s should read:\n```go\n%s\n```", readmeBegin, readmeEnd, want)
}

// exampleBody returns the body of the function name in file: the lines between its braces
// up to its Output comment, one tab less indented.
func exampleBody(file, name string) (string, error) {
	src, err := os.ReadFile(file)
	if err != nil {
		return "", err
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, src, parser.ParseComments)
	if err != nil {
		return "", err
	}
	var body *ast.BlockStmt
	for _, d := range f.Decls {
		if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil && fn.Name.Name == name {
			body = fn.Body
		}
	}
	if body == nil {
		return "", fmt.Errorf("%s: no func %s", file, name)
	}
	text := strings.ReplaceAll(string(src[fset.Position(body.Lbrace).Offset+1:fset.Position(body.Rbrace).Offset]), "\r\n", "\n")
	var lines []string
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "// Output:") {
			break
		}
		lines = append(lines, strings.TrimPrefix(l, "\t"))
	}
	return strings.Trim(strings.Join(lines, "\n"), "\n"), nil
}

// readmeBlock returns the code of the fenced Go block between the markers.
func readmeBlock(readme string) (string, error) {
	readme = strings.ReplaceAll(readme, "\r\n", "\n")
	_, rest, ok := strings.Cut(readme, readmeBegin)
	if !ok {
		return "", fmt.Errorf("README.md: no %s", readmeBegin)
	}
	block, _, ok := strings.Cut(rest, readmeEnd)
	if !ok {
		return "", fmt.Errorf("README.md: no %s after %s", readmeEnd, readmeBegin)
	}
	block = strings.TrimSpace(block)
	code, ok := strings.CutPrefix(block, "```go\n")
	if !ok {
		return "", fmt.Errorf("README.md: the block after %s does not start with ```go", readmeBegin)
	}
	code, ok = strings.CutSuffix(code, "\n```")
	if !ok {
		return "", fmt.Errorf("README.md: the block before %s does not end with ```", readmeEnd)
	}
	return strings.Trim(code, "\n"), nil
}
