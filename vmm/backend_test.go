package vmm_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/cuvmm/cuvmm/vmm"
	"github.com/stretchr/testify/require"
)

// What must change together when a driver call is added to or renamed in the Backend:
// each method's doc names its driver calls; every name is a prototype of package cu
// (cu/prototypes.go); and the CUDA() forwarder of the method (cuda.go) reaches each of those
// calls through the functions of package cu. The compiler already makes cudaBackend (and
// sim.Sim) implement every method; sim's tests check its operation names.

var (
	protoLineRE = regexp.MustCompile(`(?m)^//cu (\w+)(?: as (\w+))?\(`)
	// procLineRE matches a proc of zprocs.go: its variable and its C symbol.
	procLineRE = regexp.MustCompile(`(?m)^\s*(proc\w+)\s*= lib\.NewProc\(loader\.Symbol\{Name: "(\w+)"`)
	driverRE   = regexp.MustCompile(`\bcu[A-Z]\w*`)
)

// parseDir parses the non-test Go files of dir.
func parseDir(t *testing.T, dir string) []*ast.File {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	fset := token.NewFileSet()
	var files []*ast.File
	for _, e := range entries {
		if n := e.Name(); strings.HasSuffix(n, ".go") && !strings.HasSuffix(n, "_test.go") {
			f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, parser.ParseComments|parser.SkipObjectResolution)
			require.NoError(t, err)
			files = append(files, f)
		}
	}
	return files
}

// calledNames returns the names body refers to: the functions and methods it calls (f(),
// x.f(), in closures too) and those it passes as values (release(h, cuMemRelease)),
// among other identifiers.
func calledNames(body ast.Node) []string {
	var names []string
	ast.Inspect(body, func(n ast.Node) bool {
		if id, ok := n.(*ast.Ident); ok {
			names = append(names, id.Name)
		}
		return true
	})
	return names
}

// cuReach returns, for each function and method name of package cu, the driver calls it
// reaches: the generated functions of prototypes.go it calls and the procs (zprocs.go) it
// calls through itself, directly or through other functions of the package. Methods are
// known by name alone, which package cu keeps unambiguous enough for this: a name shared
// by two functions reaches the calls of both.
func cuReach(t *testing.T) map[string][]string {
	t.Helper()
	src, err := os.ReadFile("../cu/prototypes.go")
	require.NoError(t, err)
	symbolOf := map[string]string{} // generated function -> C symbol
	for _, m := range protoLineRE.FindAllStringSubmatch(string(src), -1) {
		name := m[1]
		if m[2] != "" {
			name = m[2]
		}
		symbolOf[name] = m[1]
	}
	require.NotEmpty(t, symbolOf)
	procs, err := os.ReadFile("../cu/zprocs.go")
	require.NoError(t, err)
	for _, m := range procLineRE.FindAllStringSubmatch(string(procs), -1) {
		symbolOf[m[1]] = m[2]
	}
	calls := map[string][]string{}
	for _, f := range parseDir(t, "../cu") {
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Body != nil {
				calls[fd.Name.Name] = append(calls[fd.Name.Name], calledNames(fd.Body)...)
			}
		}
	}
	reach := map[string][]string{}
	var visit func(name string, seen map[string]bool)
	visit = func(name string, seen map[string]bool) {
		if seen[name] {
			return
		}
		seen[name] = true
		for _, c := range calls[name] {
			visit(c, seen)
		}
	}
	for name := range calls {
		seen := map[string]bool{}
		visit(name, seen)
		var syms []string
		for n := range seen {
			if s, ok := symbolOf[n]; ok {
				syms = append(syms, s)
			}
		}
		sort.Strings(syms)
		reach[name] = slices.Compact(syms)
	}
	return reach
}

func TestBackendDocsNameTheCallsTheForwardersMake(t *testing.T) {
	reach := cuReach(t)

	// The forwarders: each cudaBackend method and the cudaBackend helpers it uses (dev,
	// ctx), down to the functions of package cu they call.
	forwarders := map[string]*ast.FuncDecl{}
	var docs map[string]string
	for _, f := range parseDir(t, ".") {
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil || len(d.Recv.List) != 1 {
					continue
				}
				if star, ok := d.Recv.List[0].Type.(*ast.StarExpr); ok {
					if id, ok := star.X.(*ast.Ident); ok && id.Name == "cudaBackend" {
						forwarders[d.Name.Name] = d
					}
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					ts, ok := s.(*ast.TypeSpec)
					if !ok || ts.Name.Name != "Backend" {
						continue
					}
					docs = map[string]string{}
					for _, m := range ts.Type.(*ast.InterfaceType).Methods.List {
						docs[m.Names[0].Name] = m.Doc.Text()
					}
				}
			}
		}
	}
	require.NotNil(t, docs, "no Backend interface in package vmm")
	reachOf := func(method string) map[string]bool {
		out := map[string]bool{}
		seen := map[string]bool{}
		var walk func(name string)
		walk = func(name string) {
			if seen[name] {
				return
			}
			seen[name] = true
			fd := forwarders[name]
			if fd == nil {
				return
			}
			for _, c := range calledNames(fd.Body) {
				walk(c)
				for _, s := range reach[c] {
					out[s] = true
				}
			}
		}
		walk(method)
		return out
	}

	bt := reflect.TypeFor[vmm.Backend]()
	for i := range bt.NumMethod() {
		m := bt.Method(i).Name
		if m == "Name" {
			continue
		}
		named := driverRE.FindAllString(docs[m], -1)
		if !assertNotEmpty(t, named, "Backend.%s: its doc names no driver call (cuXxx)", m) {
			continue
		}
		got := reachOf(m)
		for _, s := range named {
			require.True(t, got[s], "Backend.%s's doc names %s, which the CUDA forwarder (cuda.go) does not reach; it reaches %v", m, s, keys(got))
		}
	}
}

func assertNotEmpty(t *testing.T, s []string, format string, args ...any) bool {
	t.Helper()
	if len(s) == 0 {
		t.Errorf(format, args...)
		return false
	}
	return true
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
