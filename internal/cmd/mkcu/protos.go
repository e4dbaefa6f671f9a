package main

import (
	"fmt"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// protoFile is the file of package cu that holds the prototype lines.
const protoFile = "prototypes.go"

// Parameter kinds of a prototype (see cu/prototypes.go for what each means).
type paramKind int

const (
	kindValue  paramKind = iota // T
	kindHandle                  // MemHandle: pinned in the handle table
	kindIn                      // *T: copied into the frame
	kindSlice                   // []T: pointer and count, copied when it fits
	kindUser                    // unsafe.Pointer: kept alive by callKeep
	kindOut                     // out T
)

// handleType is the Go type whose values the generated code pins (in) or records (out).
const handleType = "MemHandle"

type param struct {
	name string
	kind paramKind
	typ  string // the Go type, without the * or [] of the kind
}

// proto is one //cu line: a driver call.
type proto struct {
	line    int    // in prototypes.go
	symbol  string // the C function
	goName  string // the generated function
	params  []param
	version int
	// optional marks a symbol that drivers cuvmm supports may lack (one newer than the
	// header's CUDA version): cu uses it only where the driver has it.
	optional bool
	wrapper  *wrapper // of its //cu:export line, or nil
}

// wrapper is a //cu:export line and the comment lines after it, its doc comment: an
// exported function of package cu.
type wrapper struct {
	name   string   // the function, or the method's name
	recv   int      // the parameter that is the method's receiver, or -1 for a function
	format string   // the arguments' format in the error, a Go string literal
	args   []string // the parameters it formats
	doc    []string
}

// declLine is a //cu:decl line: the C declaration of an optional call, for a header that
// predates it. It stands in for the header's declaration in the prototype check, which
// therefore still checks the call's parameters (against the header's types); where the
// header does declare the function, the two must agree.
type declLine struct {
	line   int
	symbol string
	params []cParam
}

// enumLine is one //cu:enum or //cu:define line.
type enumLine struct {
	line   int
	goType string   // "" for untyped constants
	cEnum  string   // the C enum typedef, for //cu:enum
	macros []string // the C macros, for //cu:define
}

// protoSet is everything prototypes.go declares, in file order.
type protoSet struct {
	calls []*proto
	enums []*enumLine
	decls map[string]*declLine // by symbol
}

var (
	protoRE     = regexp.MustCompile(`^//cu (\w+)(?: as (\w+))?\((.*)\) v(\d+)( optional)?$`)
	identOnlyRE = regexp.MustCompile(`^[A-Za-z_]\w*$`)
	exportRE    = regexp.MustCompile(`^(?:([A-Z]\w*)\.)?([A-Z]\w*) (".*)$`)
)

// follows says which lines each line that continues a //cu line comes right after.
var follows = map[string]string{"//cu:decl": "//cu", "//cu:export": "//cu //cu:decl"}

// reservedNames are the locals and results of the generated functions: no parameter may be
// called so.
var reservedNames = map[string]bool{"f": true, "addr": true, "r": true, "err": true}

// readProtos reads the //cu lines of dir/prototypes.go.
func readProtos(dir string) (*protoSet, error) {
	path := filepath.Join(dir, protoFile)
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	ps, err := parseProtos(string(src))
	if err != nil {
		return nil, fmt.Errorf("%s:%w", path, err)
	}
	return ps, nil
}

func parseProtos(src string) (*protoSet, error) {
	ps := &protoSet{decls: map[string]*declLine{}}
	names := map[string]int{}
	bySymbol := map[string]*proto{}
	var cur *proto // the last //cu line
	prevKind := "" // the directive of the line before, "//" for a comment, "doc" for a doc line
	for i, l := range strings.Split(src, "\n") {
		l = strings.TrimRight(l, " \t\r")
		n := i + 1
		kind, text, _ := strings.Cut(l, " ")
		if after, ok := follows[kind]; ok && !strings.Contains(" "+after+" ", " "+prevKind+" ") {
			return nil, fmt.Errorf("%d: a %s line goes right after %s", n, kind, strings.ReplaceAll(after, " ", " or "))
		}
		if kind == "//" && (prevKind == "//cu:export" || prevKind == "doc") {
			kind = "doc"
		} else if kind != "//" && !strings.HasPrefix(kind, "//cu") {
			kind = ""
		}
		prevKind = kind
		switch kind {
		case "", "//":
		case "//cu":
			p, err := parseProto(l)
			if err != nil {
				return nil, fmt.Errorf("%d: %w", n, err)
			}
			p.line = n
			if prev, dup := names[p.goName]; dup {
				return nil, fmt.Errorf("%d: %s: the Go name %s is taken by line %d (name variants with \"as\")", n, p.symbol, p.goName, prev)
			}
			names[p.goName] = n
			// The variants of one symbol share its ABI version and whether it is optional:
			// there is one proc per symbol.
			if q, ok := bySymbol[p.symbol]; ok && q.version != p.version {
				return nil, fmt.Errorf("%d: %s: version %d, but line %d says %d", n, p.symbol, p.version, q.line, q.version)
			} else if ok && q.optional != p.optional {
				return nil, fmt.Errorf("%d: %s: optional on one line and not on line %d", n, p.symbol, q.line)
			}
			bySymbol[p.symbol] = p
			ps.calls = append(ps.calls, p)
			cur = p
		case "//cu:decl":
			d, err := parseDecl(text, cur)
			if err != nil {
				return nil, fmt.Errorf("%d: %w", n, err)
			}
			d.line = n
			if q, dup := ps.decls[d.symbol]; dup {
				return nil, fmt.Errorf("%d: %s: declared already by line %d", n, d.symbol, q.line)
			}
			ps.decls[d.symbol] = d
		case "//cu:export":
			w, err := parseExport(text, cur)
			if err != nil {
				return nil, fmt.Errorf("%d: %s: %w", n, cur.symbol, err)
			}
			cur.wrapper = w
		case "doc":
			if len(cur.wrapper.doc) == 0 && !strings.HasPrefix(text, cur.wrapper.name+" ") {
				return nil, fmt.Errorf("%d: %s: the doc comment of %s starts with its name", n, cur.symbol, cur.wrapper.name)
			}
			cur.wrapper.doc = append(cur.wrapper.doc, l)
		case "//cu:enum":
			f := strings.Fields(text)
			if len(f) != 2 || !identOnlyRE.MatchString(f[1]) || (f[0] != "-" && !token.IsExported(f[0])) {
				return nil, fmt.Errorf("%d: want //cu:enum <exported Go type or -> <C enum typedef>", n)
			}
			e := &enumLine{line: n, cEnum: f[1]}
			if f[0] != "-" {
				e.goType = f[0]
			}
			ps.enums = append(ps.enums, e)
		case "//cu:define":
			f := strings.Fields(text)
			if len(f) == 0 {
				return nil, fmt.Errorf("%d: want //cu:define and the names of C macros", n)
			}
			ps.enums = append(ps.enums, &enumLine{line: n, macros: f})
		default:
			return nil, fmt.Errorf("%d: unknown directive %q (want //cu, //cu:decl, //cu:export, //cu:enum or //cu:define)", n, l)
		}
	}
	if len(ps.calls) == 0 {
		return nil, fmt.Errorf(" no //cu lines: nothing to generate")
	}
	for _, p := range ps.calls {
		if p.wrapper != nil && len(p.wrapper.doc) == 0 {
			return nil, fmt.Errorf("%d: %s: %s has no doc comment: the comment lines right after its //cu:export line", p.line, p.symbol, p.wrapper.name)
		}
	}
	return ps, nil
}

// parseDecl reads the C declaration of a //cu:decl line, which must follow the optional
// //cu line of the function it declares (after, the //cu line before it, or nil).
func parseDecl(text string, after *proto) (*declLine, error) {
	text = strings.TrimSuffix(strings.TrimSpace(text), ";")
	m := funcDeclRE.FindStringSubmatch(text)
	if m == nil || !strings.HasPrefix(text, "CUresult ") {
		return nil, fmt.Errorf("want //cu:decl CUresult CUDAAPI <symbol>(<C parameters>);, as cuda.h writes it: %q", text)
	}
	d := &declLine{symbol: m[1]}
	switch {
	case after == nil || after.symbol != d.symbol:
		return nil, fmt.Errorf("%s: a //cu:decl line follows the //cu line of the function it declares", d.symbol)
	case !after.optional:
		// A header without the function predates it, so drivers of that header's version
		// lack it: cu must not count on it.
		return nil, fmt.Errorf("%s: only an optional call has a //cu:decl line (end its //cu line with \"optional\")", d.symbol)
	}
	params, err := splitParams(m[2])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", d.symbol, err)
	}
	d.params = params
	return d, nil
}

// parseExport reads the //cu:export line of p: the wrapper's name (Type.Name for a method
// of p's first parameter of that type), the format of its arguments in the error (a Go
// string literal) and the parameters it formats.
func parseExport(text string, p *proto) (*wrapper, error) {
	m := exportRE.FindStringSubmatch(text)
	if m == nil {
		return nil, fmt.Errorf("want //cu:export <exported name, or Type.Method> \"<format>\" <parameter>...: %s", text)
	}
	w := &wrapper{name: m[2], recv: -1}
	var err error
	if w.format, err = strconv.QuotedPrefix(m[3]); err != nil {
		return nil, fmt.Errorf("the format is not a Go string literal: %s", m[3])
	}
	ins := map[string]bool{}
	for i, q := range p.params {
		switch {
		case q.kind == kindUser:
			return nil, fmt.Errorf("an exported wrapper takes no unsafe.Pointer (%s): write it by hand", q.name)
		case q.kind == kindOut:
			continue
		case w.recv < 0 && q.typ == m[1]:
			w.recv = i
		}
		ins[q.name] = true
	}
	if m[1] != "" && w.recv < 0 {
		return nil, fmt.Errorf("no parameter of type %s is the receiver of %s.%s", m[1], m[1], w.name)
	}
	w.args = strings.Fields(m[3][len(w.format):])
	for _, a := range w.args {
		if !ins[a] {
			return nil, fmt.Errorf("%s is not one of its parameters (outs are results)", a)
		}
	}
	return w, nil
}

func parseProto(l string) (*proto, error) {
	m := protoRE.FindStringSubmatch(l)
	if m == nil {
		return nil, fmt.Errorf("want //cu <C symbol>[ as <Go name>](<parameters>) v<ABI version>: %q", l)
	}
	p := &proto{symbol: m[1], goName: m[2]}
	if !strings.HasPrefix(p.symbol, "cu") {
		return nil, fmt.Errorf("%s: not a driver symbol (cu...)", p.symbol)
	}
	if p.goName == "" {
		p.goName = p.symbol
	}
	if token.IsExported(p.goName) {
		return nil, fmt.Errorf("%s: the generated function %s must be unexported: a //cu:export line names the exported wrapper", p.symbol, p.goName)
	}
	p.version, _ = strconv.Atoi(m[4])
	p.optional = m[5] != ""
	seen := map[string]bool{}
	if strings.TrimSpace(m[3]) == "" {
		return p, nil
	}
	handleOuts := 0
	for _, field := range strings.Split(m[3], ",") {
		f := strings.Fields(field)
		var q param
		if len(f) == 3 && f[0] == "out" {
			q = param{name: f[1], kind: kindOut, typ: f[2]}
			if q.typ == handleType {
				handleOuts++
			}
		} else if len(f) == 2 {
			q = param{name: f[0], typ: f[1]}
			switch {
			case q.typ == "unsafe.Pointer":
				q.kind = kindUser
			case strings.HasPrefix(q.typ, "*"):
				q.kind, q.typ = kindIn, q.typ[1:]
			case strings.HasPrefix(q.typ, "[]"):
				q.kind, q.typ = kindSlice, q.typ[2:]
			case q.typ == handleType:
				q.kind = kindHandle
			}
		} else {
			return nil, fmt.Errorf("%s: cannot read parameter %q (want name Type, or out name Type)", p.symbol, strings.TrimSpace(field))
		}
		switch {
		case !identOnlyRE.MatchString(q.name) || token.IsKeyword(q.name):
			return nil, fmt.Errorf("%s: parameter name %q is not a Go identifier", p.symbol, q.name)
		case reservedNames[q.name] || strings.HasPrefix(q.name, "pin") || strings.HasPrefix(q.name, "drv") || strings.HasPrefix(q.name, "keep"):
			return nil, fmt.Errorf("%s: parameter name %q is taken by the generated code", p.symbol, q.name)
		case seen[q.name]:
			return nil, fmt.Errorf("%s: two parameters called %s", p.symbol, q.name)
		case q.kind != kindUser && !identOnlyRE.MatchString(q.typ):
			return nil, fmt.Errorf("%s: parameter %s: type %q is not one word (a type of cu's, or a predeclared one)", p.symbol, q.name, q.typ)
		}
		seen[q.name] = true
		p.params = append(p.params, q)
	}
	if p.countKind(kindSlice) > 1 {
		return nil, fmt.Errorf("%s: more than one []T parameter", p.symbol)
	}
	if handleOuts > 1 || (handleOuts == 1 && p.countKind(kindOut) > 1) {
		return nil, fmt.Errorf("%s: an out %s must be the only out parameter", p.symbol, handleType)
	}
	return p, nil
}

func (p *proto) countKind(k paramKind) int {
	n := 0
	for _, q := range p.params {
		if q.kind == k {
			n++
		}
	}
	return n
}

// slice returns the []T parameter, or nil.
func (p *proto) slice() *param {
	for i := range p.params {
		if p.params[i].kind == kindSlice {
			return &p.params[i]
		}
	}
	return nil
}

// cArgs is how many C arguments the prototype passes: a []T passes two.
func (p *proto) cArgs() int {
	return len(p.params) + p.countKind(kindSlice)
}

// procName is the Go name of the symbol's proc: procMemCreate for cuMemCreate.
func procName(symbol string) string { return "proc" + strings.TrimPrefix(symbol, "cu") }
