package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// The Go side of the prototype check: the size of each type a prototype names, from the
// declarations of package cu itself (read with go/parser, without type checking, so that a
// half-edited package can still be regenerated). Sizes are those of the 64-bit targets.

// goPackage is the type and constant declarations of package cu that mkcu needs.
type goPackage struct {
	types  map[string]ast.Expr // type name -> its definition
	consts map[string]string   // constant name -> its literal value, for those that have one
	sizes  map[string]goShape
}

type goShape struct {
	size, align int
	integer     bool // an integer type: what a C integer or enum may be passed as
}

// goBasics are the predeclared types a prototype may use.
var goBasics = map[string]goShape{
	"int8": {1, 1, true}, "uint8": {1, 1, true}, "byte": {1, 1, true},
	"int16": {2, 2, true}, "uint16": {2, 2, true},
	"int32": {4, 4, true}, "uint32": {4, 4, true}, "rune": {4, 4, true},
	"int64": {8, 8, true}, "uint64": {8, 8, true}, "int": {8, 8, true}, "uint": {8, 8, true},
	"uintptr": {8, 8, true}, "float32": {4, 4, false}, "float64": {8, 8, false}, "bool": {1, 1, false},
	"unsafe.Pointer": {8, 8, false},
}

// readGoPackage parses the non-test Go files of dir, less the files mkcu writes.
func readGoPackage(dir string, skip map[string]bool) (*goPackage, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	pkg := &goPackage{types: map[string]ast.Expr{}, consts: map[string]string{}, sizes: map[string]goShape{}}
	fset := token.NewFileSet()
	for _, e := range entries { // sorted by name, so that the first declaration wins the same way each time
		n := e.Name()
		if !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") || skip[n] {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok {
				continue
			}
			for _, s := range g.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					if _, seen := pkg.types[s.Name.Name]; !seen && s.Assign == 0 {
						pkg.types[s.Name.Name] = s.Type
					}
				case *ast.ValueSpec:
					for i := range min(len(s.Names), len(s.Values)) {
						if lit, ok := s.Values[i].(*ast.BasicLit); ok && g.Tok == token.CONST {
							pkg.consts[s.Names[i].Name] = lit.Value
						}
					}
				}
			}
		}
	}
	return pkg, nil
}

// define declares a type that mkcu generates (an enum's), so that prototypes may use it.
func (p *goPackage) define(name string, underlying string) {
	p.types[name] = ast.NewIdent(underlying)
	delete(p.sizes, name)
}

// shape returns the size, alignment and kind of the Go type name.
func (p *goPackage) shape(name string) (goShape, error) {
	return p.shapeOf(&ast.Ident{Name: name}, 0)
}

func (p *goPackage) shapeOf(e ast.Expr, depth int) (goShape, error) {
	if depth > 32 {
		return goShape{}, fmt.Errorf("type loop")
	}
	switch e := e.(type) {
	case *ast.Ident:
		if s, ok := goBasics[e.Name]; ok {
			return s, nil
		}
		if s, ok := p.sizes[e.Name]; ok {
			return s, nil
		}
		def, ok := p.types[e.Name]
		if !ok {
			return goShape{}, fmt.Errorf("no type %s in package cu", e.Name)
		}
		s, err := p.shapeOf(def, depth+1)
		if err != nil {
			return goShape{}, fmt.Errorf("%s: %w", e.Name, err)
		}
		p.sizes[e.Name] = s
		return s, nil
	case *ast.SelectorExpr:
		if x, ok := e.X.(*ast.Ident); ok && x.Name == "unsafe" && e.Sel.Name == "Pointer" {
			return goBasics["unsafe.Pointer"], nil
		}
	case *ast.StarExpr:
		return goShape{size: 8, align: 8}, nil
	case *ast.ArrayType:
		if e.Len == nil {
			break // a slice
		}
		n, err := p.length(e.Len)
		if err != nil {
			return goShape{}, err
		}
		el, err := p.shapeOf(e.Elt, depth+1)
		if err != nil {
			return goShape{}, err
		}
		return goShape{size: n * el.size, align: el.align}, nil
	case *ast.StructType:
		size, align := 0, 1
		for _, f := range e.Fields.List {
			fs, err := p.shapeOf(f.Type, depth+1)
			if err != nil {
				return goShape{}, err
			}
			n := max(len(f.Names), 1)
			for range n {
				size = alignUp(size, fs.align) + fs.size
			}
			align = max(align, fs.align)
		}
		return goShape{size: alignUp(size, align), align: align}, nil
	}
	return goShape{}, fmt.Errorf("cannot size the Go type %T", e)
}

func (p *goPackage) length(e ast.Expr) (int, error) {
	switch e := e.(type) {
	case *ast.BasicLit:
		n, err := strconv.ParseInt(e.Value, 0, 64)
		return int(n), err
	case *ast.Ident:
		if v, ok := p.consts[e.Name]; ok {
			n, err := strconv.ParseInt(v, 0, 64)
			return int(n), err
		}
	}
	return 0, fmt.Errorf("array length is not a literal or a literal constant")
}
