package main

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// The C side of the prototype check: what cuda.h declares for each function, and the size of
// every type a prototype passes. This is not a C parser. It reads the header as cuda.h is
// written (one declaration per statement, typedef'd structs of scalars, arrays and nested
// structs), takes the first declaration of a name where the header has several under
// preprocessor conditions (the LP64 ones come first, the pre-_v2 ones last), and refuses
// what it does not understand rather than guess. Sizes are those of the 64-bit ABIs cuvmm
// ships for (LP64 and LLP64 agree on every type cuda.h uses in these calls).

// cHeader is the declarations of cuda.h that the prototype check needs.
type cHeader struct {
	typedefs map[string]string     // name -> the type it names: "unsigned long long", "struct CUctx_st *", "enum X"
	structs  map[string]*cStruct   // struct or union tag -> its members
	funcs    map[string][]cParam   // function -> its parameters, from its first declaration
	exports  map[string]string     // base name -> the suffixed export cuda.h maps it to ("cuMemAlloc_v2")
	macros   map[string]string     // object-like #define -> its text
	anon     int                   // counter for the tags of anonymous structs
	sizes    map[string]cTypeShape // memo of shape
}

type cStruct struct {
	union   bool
	members []cMember
}

type cMember struct {
	typ   string // the member's type, with pointer stars
	name  string
	count int // array length; 0 for a scalar
}

// cParam is one parameter of a C function declaration.
type cParam struct {
	typ  string // type text, "const" kept: "const CUmemAllocationProp *"
	name string
}

// cTypeShape is what the check needs of a C type.
type cTypeShape struct {
	size, align int
	pointer     bool   // a pointer (the pointee is elem)
	elem        string // pointee type text, for pointers
	constElem   bool   // the pointee is const
	void        bool   // void itself (the pointee of a void *)
	opaque      bool   // a struct the header never defines (the pointee of a handle type)
	integer     bool   // an integer or enum type
}

var (
	externCRE   = regexp.MustCompile(`extern\s*"C"\s*\{`)
	commentRE   = regexp.MustCompile(`(?s)/\*.*?\*/|//[^\n]*|"[^"]*"`)
	directiveRE = regexp.MustCompile(`(?m)^[ \t]*#.*$`)
	// defineRE matches an object-like #define, not a function-like one: there a "(" follows
	// the name, not a blank or the end of the line.
	defineRE    = regexp.MustCompile(`(?m)^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)(?:[ \t]+(.*))?$`)
	funcDeclRE  = regexp.MustCompile(`(?s)\bCUDAAPI\s+(\w+)\s*\((.*)\)\s*$`)
	exportMapRE = regexp.MustCompile(`^(\w+)\s*$|^__CUDA_API_PT(?:DS|SZ)\(\s*(\w+)\s*\)$`)
	wordRE      = regexp.MustCompile(`[A-Za-z_]\w*`)
	arrayRE     = regexp.MustCompile(`^(.*?)\s*\[\s*([^\[\]]+?)\s*\]$`)
	bracketsRE  = regexp.MustCompile(`\[[^\[\]]*\]`)
	sizeofRE    = regexp.MustCompile(`^sizeof\s*\(\s*(.+?)\s*\)$`)
	// lenTermRE matches a term of an array length and the sign before it. A type in sizeof
	// has no + or -.
	lenTermRE = regexp.MustCompile(`([+-]?)\s*(sizeof\s*\([^()]*\)|[^+\-\s]+)`)
)

// parseCHeader reads the declarations of src.
func parseCHeader(src []byte) (*cHeader, error) {
	h := &cHeader{
		typedefs: map[string]string{},
		structs:  map[string]*cStruct{},
		funcs:    map[string][]cParam{},
		exports:  map[string]string{},
		macros:   map[string]string{},
		sizes:    map[string]cTypeShape{},
	}
	// Preprocessor lines: keep the object-like #defines, drop the rest.
	text := strings.ReplaceAll(stripComments(string(src)), "\\\n", " ")
	for _, m := range defineRE.FindAllStringSubmatch(text, -1) {
		if _, seen := h.macros[m[1]]; !seen {
			h.macros[m[1]] = strings.TrimSpace(m[2])
		}
	}
	// cuda.h maps some names to suffixed exports (#define cuMemAlloc cuMemAlloc_v2, or
	// through __CUDA_API_PTDS): the export for drivers without cuGetProcAddress.
	for name, val := range h.macros {
		m := exportMapRE.FindStringSubmatch(val)
		if m != nil && strings.HasPrefix(name, "cu") && strings.HasPrefix(m[1]+m[2], name+"_v") {
			h.exports[name] = m[1] + m[2]
		}
	}
	body := directiveRE.ReplaceAllString(text, "")
	for _, st := range statements(externCRE.ReplaceAllString(body, " ")) {
		if err := h.statement(st); err != nil {
			return nil, err
		}
	}
	return h, nil
}

// stripComments replaces every comment of C text with a space, keeping its line breaks so
// that preprocessor lines stay lines. A string literal is kept whole, whatever it holds.
func stripComments(s string) string {
	return commentRE.ReplaceAllStringFunc(s, func(m string) string {
		switch {
		case strings.HasPrefix(m, "/*"):
			return strings.Repeat("\n", strings.Count(m, "\n")) + " "
		case strings.HasPrefix(m, "//"):
			return ""
		}
		return m
	})
}

// statements splits C text into its top-level statements, at the semicolons outside braces.
// A brace closing more than was opened (the end of an extern "C" block) ends a statement.
func statements(s string) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '{':
			depth++
		case '}':
			depth--
			if depth < 0 {
				depth, start = 0, i+1
			}
		case ';':
			if depth == 0 {
				if st := strings.Join(strings.Fields(s[start:i]), " "); st != "" {
					out = append(out, st)
				}
				start = i + 1
			}
		}
	}
	return out
}

// statement records one top-level statement: a typedef, a struct definition or a function
// declaration. Everything else is ignored.
func (h *cHeader) statement(st string) error {
	if m := funcDeclRE.FindStringSubmatch(st); m != nil && !strings.HasPrefix(st, "typedef") {
		name := m[1]
		if _, seen := h.funcs[name]; seen {
			return nil
		}
		params, err := splitParams(m[2])
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		h.funcs[name] = params
		return nil
	}
	typedef := strings.HasPrefix(st, "typedef ")
	if typedef {
		st = strings.TrimSpace(st[len("typedef "):])
	}
	if open := strings.IndexByte(st, '{'); open >= 0 {
		close := strings.LastIndexByte(st, '}')
		if close < open {
			return nil
		}
		head := append(strings.Fields(st[:open]), "", "") // kind and tag, "" where missing
		kind, tag := head[0], head[1]
		if kind != "struct" && kind != "union" && kind != "enum" {
			return nil
		}
		if tag == "" {
			tag = h.anonTag()
		}
		if kind != "enum" {
			// A struct this check cannot read (nil) only matters if a prototype uses it.
			s, _ := h.parseMembers(st[open+1:close], kind == "union")
			if _, seen := h.structs[tag]; !seen {
				h.structs[tag] = s
			}
		}
		if typedef {
			for _, d := range strings.Split(st[close+1:], ",") {
				h.declare(kind+" "+tag, d)
			}
		}
		return nil
	}
	if !typedef {
		return nil
	}
	// typedef <type> <declarator>: the name is the last word; what is before it (stars
	// included) is the type. Function pointer typedefs have parentheses and are skipped.
	if strings.ContainsAny(st, "()") {
		return nil
	}
	loc := wordRE.FindAllStringIndex(st, -1)
	if len(loc) < 2 {
		return nil
	}
	last := loc[len(loc)-1]
	h.declare(st[:last[0]], st[last[0]:])
	return nil
}

func (h *cHeader) anonTag() string {
	h.anon++
	return fmt.Sprintf("anonymous·%d", h.anon)
}

// stars moves the pointer stars that start declarator d onto the type typ.
func stars(typ, d string) (string, string) {
	d = strings.TrimSpace(d)
	for strings.HasPrefix(d, "*") {
		typ += " *"
		d = strings.TrimSpace(d[1:])
	}
	return typ, d
}

// declare records the typedef of declarator d (a name, maybe with stars or an array
// length) to type typ.
func (h *cHeader) declare(typ, d string) {
	typ, d = stars(typ, d)
	if !identOnlyRE.MatchString(d) {
		return // array typedefs are not used by the calls cu makes
	}
	if _, seen := h.typedefs[d]; !seen {
		h.typedefs[d] = strings.TrimSpace(typ)
	}
}

// parseMembers reads the members of a struct or union body.
func (h *cHeader) parseMembers(body string, union bool) (*cStruct, error) {
	s := &cStruct{union: union}
	for _, m := range statements(body) {
		if open := strings.IndexByte(m, '{'); open >= 0 {
			close := strings.LastIndexByte(m, '}')
			head := strings.Fields(m[:open])
			if len(head) == 0 || (head[0] != "struct" && head[0] != "union") {
				return nil, fmt.Errorf("cannot read member %q", m)
			}
			tag := h.anonTag()
			inner, err := h.parseMembers(m[open+1:close], head[0] == "union")
			if err != nil {
				return nil, err
			}
			h.structs[tag] = inner
			for _, d := range strings.Split(m[close+1:], ",") {
				mem, err := h.member(head[0]+" "+tag, d)
				if err != nil {
					return nil, err
				}
				s.members = append(s.members, mem)
			}
			continue
		}
		if strings.ContainsAny(bracketsRE.ReplaceAllString(m, "[]"), "():") { // sizeof in a length is fine
			return nil, fmt.Errorf("cannot read member %q", m)
		}
		// "type a, *b, c[4]": the type is what precedes the first declarator, which is the
		// last word of the first part (with the stars before it and the length after it).
		parts := strings.Split(m, ",")
		p0 := parts[0]
		if i := strings.IndexByte(p0, '['); i >= 0 {
			p0 = p0[:i]
		}
		loc := wordRE.FindAllStringIndex(p0, -1)
		if len(loc) < 2 {
			return nil, fmt.Errorf("cannot read member %q", m)
		}
		typ := strings.TrimRight(p0[:loc[len(loc)-1][0]], " *")
		parts[0] = parts[0][len(typ):]
		for _, d := range parts {
			mem, err := h.member(typ, d)
			if err != nil {
				return nil, err
			}
			s.members = append(s.members, mem)
		}
	}
	return s, nil
}

func (h *cHeader) member(typ, d string) (cMember, error) {
	typ, d = stars(typ, d)
	mem := cMember{typ: strings.TrimSpace(typ), name: d}
	if m := arrayRE.FindStringSubmatch(d); m != nil {
		n, err := h.lenValue(m[2])
		if err != nil {
			return cMember{}, fmt.Errorf("member %s: %w", d, err)
		}
		mem.name, mem.count = m[1], n
	}
	if wordRE.FindString(mem.name) != mem.name {
		return cMember{}, fmt.Errorf("cannot read member %q", d)
	}
	return mem, nil
}

// lenValue is the value of an array length: integer literals, macros that expand to one,
// and sizeof(T), added and subtracted (CUcheckpointRestoreArgs's reserved is
// "52 - sizeof(CUcheckpointGpuPair *)").
func (h *cHeader) lenValue(s string) (int, error) {
	total, end := 0, 0
	for i, at := range lenTermRE.FindAllStringSubmatchIndex(s, -1) {
		m := []string{s[at[0]:at[1]], s[at[2]:at[3]], s[at[4]:at[5]]}
		// Terms follow one another with only space between, each after the first signed.
		if strings.TrimSpace(s[end:at[0]]) != "" || (i > 0 && m[1] == "") {
			return 0, fmt.Errorf("array length %q is not a number", s)
		}
		end = at[1]
		v, err := h.term(s, m[2])
		if err != nil {
			return 0, err
		}
		if m[1] == "-" {
			v = -v
		}
		total += v
	}
	if strings.TrimSpace(s[end:]) != "" {
		return 0, fmt.Errorf("array length %q is not a number", s)
	}
	if total < 0 {
		return 0, fmt.Errorf("array length %q is negative", s)
	}
	return total, nil
}

// term is the value of the term t of the array length s: sizeof(T), an integer literal, or a
// macro that expands to one.
func (h *cHeader) term(s, t string) (int, error) {
	if sz := sizeofRE.FindStringSubmatch(t); sz != nil {
		sh, err := h.shape(sz[1])
		if err != nil {
			return 0, fmt.Errorf("array length %q: %w", s, err)
		}
		return sh.size, nil
	}
	// A macro may name another, to a bound (#define A B, #define B A).
	for i := 0; i < 8 && h.macros[t] != ""; i++ {
		t = h.macros[t]
	}
	v, err := parseInt(t)
	if err != nil {
		return 0, fmt.Errorf("array length %q is not a number", t)
	}
	return int(v), nil
}

// splitParams splits a parameter list into parameters. "void" alone is no parameter.
func splitParams(list string) ([]cParam, error) {
	list = strings.TrimSpace(list)
	if list == "" || list == "void" {
		return nil, nil
	}
	var out []cParam
	for _, p := range strings.Split(list, ",") {
		p = strings.TrimSpace(p)
		if strings.ContainsAny(p, "()[") {
			return nil, fmt.Errorf("cannot read parameter %q", p)
		}
		loc := wordRE.FindAllStringIndex(p, -1)
		if len(loc) < 2 {
			return nil, fmt.Errorf("parameter %q has no name", p)
		}
		last := loc[len(loc)-1]
		out = append(out, cParam{typ: strings.TrimSpace(p[:last[0]]), name: p[last[0]:]})
	}
	return out, nil
}

// cBuiltins are the sizes of C's scalar types on the 64-bit ABIs.
var cBuiltins = map[string]int{
	"char": 1, "signed char": 1, "unsigned char": 1,
	"short": 2, "unsigned short": 2, "short int": 2, "unsigned short int": 2,
	"int": 4, "unsigned int": 4, "unsigned": 4, "signed": 4, "signed int": 4,
	"long long": 8, "unsigned long long": 8, "long long int": 8, "unsigned long long int": 8,
	"size_t": 8, "float": 4, "double": 8,
	"int8_t": 1, "uint8_t": 1, "int16_t": 2, "uint16_t": 2, "int32_t": 4, "uint32_t": 4,
	"int64_t": 8, "uint64_t": 8, "uintptr_t": 8,
	// cuda.h's cuuint64_t under _WIN32, which comes first in the header (preprocessor
	// branches are not followed): the same size on every 64-bit ABI.
	"__int64": 8, "unsigned __int64": 8,
}

var errLongSize = errors.New(`"long" differs between LP64 and LLP64`)

// shape returns the size, alignment and kind of the C type t.
func (h *cHeader) shape(t string) (cTypeShape, error) {
	if s, ok := h.sizes[t]; ok {
		return s, nil
	}
	s, err := h.shapeOf(t, 0)
	if err == nil {
		h.sizes[t] = s
	}
	return s, err
}

func (h *cHeader) shapeOf(t string, depth int) (cTypeShape, error) {
	if depth > 32 {
		return cTypeShape{}, fmt.Errorf("typedef loop at %q", t)
	}
	t = strings.TrimSpace(t)
	if star := strings.LastIndexByte(t, '*'); star >= 0 {
		elem := strings.TrimSpace(t[:star])
		return cTypeShape{size: 8, align: 8, pointer: true, elem: elem, constElem: slices.Contains(strings.Fields(elem), "const")}, nil
	}
	words := slices.DeleteFunc(strings.Fields(t), func(w string) bool { return w == "const" || w == "volatile" })
	base := strings.Join(words, " ")
	if base == "void" {
		return cTypeShape{void: true}, nil
	}
	if n, ok := cBuiltins[base]; ok {
		return cTypeShape{size: n, align: n, integer: !strings.Contains(base, "float") && base != "double"}, nil
	}
	if strings.Contains(" "+base+" ", " long ") {
		return cTypeShape{}, errLongSize
	}
	if len(words) == 2 {
		switch words[0] {
		case "enum":
			return cTypeShape{size: 4, align: 4, integer: true}, nil
		case "struct", "union":
			st, ok := h.structs[words[1]]
			if !ok {
				// Declared, never defined (CUctx_st behind CUcontext): what a pointer to it
				// points to has no size on this side of the driver.
				return cTypeShape{opaque: true}, nil
			}
			if st == nil {
				return cTypeShape{}, fmt.Errorf("cannot lay out %s", base)
			}
			return h.layout(st, depth)
		}
	}
	if len(words) == 1 {
		if def, ok := h.typedefs[words[0]]; ok {
			return h.shapeOf(def, depth+1)
		}
	}
	return cTypeShape{}, fmt.Errorf("unknown C type %q", t)
}

// layout computes a struct's or union's size and alignment by the C rules.
func (h *cHeader) layout(st *cStruct, depth int) (cTypeShape, error) {
	size, align := 0, 1
	for _, m := range st.members {
		ms, err := h.shapeOf(m.typ, depth+1)
		if err != nil {
			return cTypeShape{}, fmt.Errorf("member %s: %w", m.name, err)
		}
		if ms.void {
			return cTypeShape{}, fmt.Errorf("member %s has type void", m.name)
		}
		n := ms.size * max(m.count, 1)
		align = max(align, ms.align)
		if st.union {
			size = max(size, n)
			continue
		}
		size = alignUp(size, ms.align) + n
	}
	return cTypeShape{size: alignUp(size, align), align: align}, nil
}

func alignUp(n, a int) int { return (n + a - 1) / a * a }

// pfnVersions reads the ABI version of each function from cudaTypedefs.h: the version its
// PFN_<name> macro names, which is the one of the prototype in cuda.h.
func pfnVersions(src []byte) map[string]int {
	out := map[string]int{}
	for _, m := range pfnRE.FindAllSubmatch(src, -1) {
		// The version is in one of the two forms' groups, the other is empty.
		if n, err := strconv.Atoi(string(m[2]) + string(m[3])); err == nil {
			out[string(m[1])] = n
		}
	}
	return out
}

var pfnRE = regexp.MustCompile(`(?m)^\s*#\s*define\s+PFN_(\w+)\s+(?:PFN_\w+?_v(\d+)\s*$|__API_TYPEDEF_PT(?:DS|SZ)\(\s*PFN_\w+\s*,\s*(\d+)\s*,)`)
