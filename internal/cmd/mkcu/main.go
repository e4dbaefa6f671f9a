// Command mkcu generates the driver-call layer of package cu from the CUDA driver header
// and cu/prototypes.go, in the manner of golang.org/x/sys/unix's mkerrors and mksyscall:
// the header is parsed once by a maintainer and the result is checked in, so building the
// binding never needs the CUDA toolkit.
//
// Usage (normally through go generate in package cu):
//
//	go run ./internal/cmd/mkcu -header /usr/local/cuda/include/cuda.h -out cu
//
// It reads the //cu lines of cu/prototypes.go (one per driver call; that file says what
// they mean), checks each against the function cuda.h declares (number of parameters,
// which are pointers, the size of every value and pointee, on the Go side from package
// cu's own declarations) and, given cudaTypedefs.h (-typedefs, or beside the header), the
// ABI version against its PFN_<name> macro. A disagreement fails generation with a message
// naming the symbol. It writes:
//
//   - zprocs.go: the proc table, one entry per driver symbol, with its ABI version and the
//     suffixed export cuda.h maps it to (#define cuMemAlloc cuMemAlloc_v2).
//   - zcalls.go: one unexported function per prototype that lays out the call's frame
//     (frame.go), pins handle arguments in the handle table, makes the call and returns
//     its outs (emitcalls.go says how).
//   - zvmmtypes.go: the enums and #define constants the //cu:enum and //cu:define lines
//     name.
//   - zresult.go: one Result constant per CUresult enumerator (the C name less "CUDA_") and
//     the name and description lookups behind Result's methods. The constants are the only
//     names of the results: errors.Is(err, cu.ERROR_OUT_OF_MEMORY), as NVML's Go binding
//     spells its own.
//   - zattribute.go: one DeviceAttribute constant per CUdevice_attribute enumerator (the C
//     name less "CU_"), the name and description lookups, and allAttributes.
//
// Descriptions are the first sentence of each enumerator's doxygen comment, with the
// doxygen markup ("::" cross-references, \ref and the like) removed and whitespace collapsed,
// so they read well in an error message. For CUresult the boilerplate lead-in ("This
// indicates that", "This error indicates that") is dropped too: what is left is the part a
// reader of "CUDA_ERROR_X: ..." needs.
//
// Several enumerators can share one value: CUdevice_attribute keeps deprecated spellings next
// to the names that replaced them. All of them become constants, but the lookups need one
// name per value, the "primary": the first one in the group that is not deprecated, or the
// first one when all are. The other names get a "Deprecated: Use [PRIMARY] instead." note.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"go/format"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode"
)

// maxDescription bounds a description so that an error message stays on one line.
const maxDescription = 160

// maxNote bounds the text of a "Deprecated:" note in a generated doc comment.
const maxNote = 200

// generatedFiles are the files mkcu writes into package cu.
var generatedFiles = map[string]bool{
	"zresult.go": true, "zattribute.go": true, "zprocs.go": true, "zcalls.go": true, "zvmmtypes.go": true,
}

func main() {
	header := flag.String("header", "/usr/local/cuda/include/cuda.h", "path of the CUDA driver header `cuda.h`")
	typedefs := flag.String("typedefs", "", "path of `cudaTypedefs.h`, to check the prototypes' ABI versions (default: cudaTypedefs.h beside -header, if it is there)")
	out := flag.String("out", "cu", "`directory` of package cu: "+protoFile+" is read from it, the generated files are written into it")
	flag.Parse()
	if flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "mkcu: unexpected arguments:", flag.Args())
		flag.Usage()
		os.Exit(2)
	}
	if err := run(*header, *typedefs, *out, *out); err != nil {
		fmt.Fprintln(os.Stderr, "mkcu:", err)
		os.Exit(1)
	}
}

// run generates from the header at headerPath and package cu in pkgDir into the directory
// out. typedefsPath may be empty: then cudaTypedefs.h beside the header is used if it exists,
// and the ABI versions are not checked if it does not.
func run(headerPath, typedefsPath, pkgDir, out string) error {
	src, err := os.ReadFile(headerPath)
	if err != nil {
		return err
	}
	explicit := typedefsPath != ""
	if !explicit {
		typedefsPath = filepath.Join(filepath.Dir(headerPath), "cudaTypedefs.h")
	}
	typedefs, err := os.ReadFile(typedefsPath)
	if err != nil {
		if explicit || !errors.Is(err, os.ErrNotExist) {
			return err
		}
		typedefs = nil
	}
	files, err := generate(src, typedefs, pkgDir)
	if err != nil {
		return fmt.Errorf("%s: %w", headerPath, err)
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if err := os.WriteFile(filepath.Join(out, name), files[name], 0o644); err != nil {
			return err
		}
	}
	return nil
}

// generate returns the generated files, by base name, for the header text src, the text of
// cudaTypedefs.h (nil when there is none) and package cu in pkgDir.
func generate(src, typedefs []byte, pkgDir string) (map[string][]byte, error) {
	version, err := cudaVersion(src)
	if err != nil {
		return nil, err
	}
	results, err := parseEnum(src, "cudaError_enum", "CUresult")
	if err != nil {
		return nil, err
	}
	attrs, err := parseEnum(src, "CUdevice_attribute_enum", "CUdevice_attribute")
	if err != nil {
		return nil, err
	}
	zresult, err := emitResults(version, results)
	if err != nil {
		return nil, fmt.Errorf("zresult.go: %w", err)
	}
	zattr, err := emitAttributes(version, attrs)
	if err != nil {
		return nil, fmt.Errorf("zattribute.go: %w", err)
	}
	files := map[string][]byte{"zresult.go": zresult, "zattribute.go": zattr}

	protos, err := readProtos(pkgDir)
	if err != nil {
		return nil, err
	}
	pkg, err := readGoPackage(pkgDir, generatedFiles)
	if err != nil {
		return nil, err
	}
	h, err := parseCHeader(src)
	if err != nil {
		return nil, err
	}
	if files["zvmmtypes.go"], err = emitVMMTypes(version, src, h, protos.enums, pkg); err != nil {
		return nil, fmt.Errorf("zvmmtypes.go: %w", err)
	}
	var pfn map[string]int
	if typedefs != nil {
		pfn = pfnVersions(typedefs)
	}
	calls, err := checkCalls(protos, h, pkg, pfn)
	if err != nil {
		return nil, err
	}
	fs, err := readFrameShape(pkg)
	if err != nil {
		return nil, err
	}
	if files["zcalls.go"], err = emitCalls(version, calls, fs); err != nil {
		return nil, fmt.Errorf("zcalls.go: %w", err)
	}
	if files["zprocs.go"], err = emitProcs(version, calls); err != nil {
		return nil, fmt.Errorf("zprocs.go: %w", err)
	}
	return files, nil
}

// readFrameShape reads frameWords (frame.go) and maxSyscallArgs (syscall.go) from package cu.
func readFrameShape(pkg *goPackage) (frameShape, error) {
	var fs frameShape
	for name, v := range map[string]*int{"frameWords": &fs.words, "maxSyscallArgs": &fs.maxArgs} {
		lit, ok := pkg.consts[name]
		if !ok {
			return fs, fmt.Errorf("package cu has no constant %s with a literal value", name)
		}
		n, err := strconv.Atoi(lit)
		if err != nil {
			return fs, fmt.Errorf("%s = %s: %w", name, lit, err)
		}
		*v = n
	}
	return fs, nil
}

var cudaVersionRE = regexp.MustCompile(`(?m)^\s*#\s*define\s+CUDA_VERSION\s+(\d+)\b`)

// cudaVersion returns the header's CUDA_VERSION. It goes into the generated header comment so
// that a stale file can be told apart from a file generated from another toolkit.
func cudaVersion(src []byte) (int, error) {
	m := cudaVersionRE.FindSubmatch(src)
	if m == nil {
		return 0, errors.New("no #define CUDA_VERSION: not a CUDA driver header")
	}
	return strconv.Atoi(string(m[1]))
}

// enumerator is one constant of a C enum.
type enumerator struct {
	name       string // C name
	valueText  string // as written after '=', empty when implicit
	value      int64
	doc        string // doxygen comment text, markers and leading '*' removed, whitespace collapsed
	deprecated bool
	primary    string // C name of the primary enumerator with the same value; itself when primary
}

func (e *enumerator) isPrimary() bool { return e.primary == e.name }

// parseEnum returns the enumerators of `typedef enum tag { ... } typedefName;`, in header
// order, with values resolved and primaries chosen.
func parseEnum(src []byte, tag, typedefName string) ([]*enumerator, error) {
	start := regexp.MustCompile(`typedef\s+enum\s+` + regexp.QuoteMeta(tag) + `\s*\{`).FindIndex(src)
	if start == nil {
		return nil, fmt.Errorf("enum %s not found", tag)
	}
	endRE := regexp.MustCompile(`\}\s*` + regexp.QuoteMeta(typedefName) + `\s*;`)
	end := endRE.FindIndex(src[start[1]:])
	if end == nil {
		return nil, fmt.Errorf("end of enum %s (} %s;) not found", tag, typedefName)
	}
	body := string(src[start[1] : start[1]+end[0]])
	entries, err := lexEnum(body)
	if err != nil {
		return nil, fmt.Errorf("enum %s: %w", tag, err)
	}
	if len(entries) == 0 {
		return nil, fmt.Errorf("enum %s is empty", tag)
	}
	if err := resolve(entries); err != nil {
		return nil, fmt.Errorf("enum %s: %w", tag, err)
	}
	return entries, nil
}

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*`)

// lexEnum splits an enum body into enumerators and attaches doxygen comments: a "/**"
// comment documents the next enumerator, a "/**<" comment the one before it.
func lexEnum(body string) ([]*enumerator, error) {
	var (
		entries    []*enumerator
		cur        *enumerator
		pendingDoc string
	)
	attachTrailing := func(doc string) {
		switch {
		case cur != nil:
			cur.doc = joinDoc(cur.doc, doc)
		case len(entries) > 0:
			last := entries[len(entries)-1]
			last.doc = joinDoc(last.doc, doc)
		}
	}
	for i := 0; i < len(body); {
		rest := body[i:]
		switch {
		case unicode.IsSpace(rune(body[i])):
			i++
		case strings.HasPrefix(rest, "/*"):
			end := strings.Index(rest[2:], "*/")
			if end < 0 {
				return nil, errors.New("unterminated comment")
			}
			text := rest[2 : 2+end]
			i += 2 + end + 2
			switch {
			case strings.HasPrefix(text, "*<"), strings.HasPrefix(text, "!<"):
				attachTrailing(cleanComment(text[2:]))
			case strings.HasPrefix(text, "*"), strings.HasPrefix(text, "!"):
				pendingDoc = joinDoc(pendingDoc, cleanComment(text[1:]))
			}
		case strings.HasPrefix(rest, "//"):
			end := strings.IndexByte(rest, '\n')
			if end < 0 {
				end = len(rest)
			}
			text := rest[2:end]
			i += end
			switch {
			case strings.HasPrefix(text, "/<"), strings.HasPrefix(text, "!<"):
				attachTrailing(cleanComment(text[2:]))
			case strings.HasPrefix(text, "/"), strings.HasPrefix(text, "!"):
				pendingDoc = joinDoc(pendingDoc, cleanComment(text[1:]))
			}
		case body[i] == '#':
			// Conditional enumerators would need a preprocessor to get right; refuse rather
			// than guess.
			return nil, fmt.Errorf("preprocessor directive inside enum: %q", firstLine(rest))
		case body[i] == ',':
			if cur == nil {
				return nil, errors.New("stray ','")
			}
			entries = append(entries, cur)
			cur = nil
			i++
		case body[i] == '=':
			if cur == nil || cur.valueText != "" {
				return nil, fmt.Errorf("unexpected '=' near %q", firstLine(rest))
			}
			j := 1
			for j < len(rest) && rest[j] != ',' && !strings.HasPrefix(rest[j:], "/*") && !strings.HasPrefix(rest[j:], "//") {
				j++
			}
			cur.valueText = strings.TrimSpace(rest[1:j])
			if cur.valueText == "" {
				return nil, fmt.Errorf("%s: empty value", cur.name)
			}
			i += j
		default:
			id := identRE.FindString(rest)
			if id == "" || cur != nil {
				return nil, fmt.Errorf("cannot parse enum body near %q", firstLine(rest))
			}
			cur = &enumerator{name: id, doc: pendingDoc}
			pendingDoc = ""
			i += len(id)
		}
	}
	if cur != nil {
		entries = append(entries, cur)
	}
	return entries, nil
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return strings.TrimSpace(s)
}

func joinDoc(a, b string) string {
	if a == "" {
		return b
	}
	if b == "" {
		return a
	}
	return a + " " + b
}

// cleanComment removes the leading '*' of each comment line and collapses whitespace.
func cleanComment(text string) string {
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		l = strings.TrimSpace(l)
		l = strings.TrimLeft(l, "*")
		lines[i] = l
	}
	return strings.Join(strings.Fields(strings.Join(lines, " ")), " ")
}

// resolve computes values (implicit ones follow C: the previous value plus one), marks
// deprecated enumerators and picks the primary name of every value.
func resolve(entries []*enumerator) error {
	byName := make(map[string]*enumerator, len(entries))
	var next int64
	for _, e := range entries {
		if _, dup := byName[e.name]; dup {
			return fmt.Errorf("%s defined twice", e.name)
		}
		switch t := e.valueText; {
		case t == "":
			e.value = next
		case byName[t] != nil:
			e.value = byName[t].value
		default:
			v, err := parseInt(t)
			if err != nil {
				return fmt.Errorf("%s: value %q: %w", e.name, t, err)
			}
			e.value = v
		}
		if e.value < -1<<31 || e.value > 1<<31-1 {
			return fmt.Errorf("%s: value %d does not fit in int32", e.name, e.value)
		}
		next = e.value + 1
		e.deprecated = isDeprecated(e.doc)
		byName[e.name] = e
	}
	primary := make(map[int64]*enumerator)
	for _, e := range entries {
		if p := primary[e.value]; p == nil || (p.deprecated && !e.deprecated) {
			primary[e.value] = e
		}
	}
	for _, e := range entries {
		e.primary = primary[e.value].name
	}
	return nil
}

// parseInt parses a C integer literal, with an optional sign and U/L suffixes.
func parseInt(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "(") && strings.HasSuffix(s, ")") {
		s = strings.TrimSpace(s[1 : len(s)-1])
	}
	s = strings.TrimRight(s, "uUlL")
	return strconv.ParseInt(s, 0, 64)
}

var deprecatedRE = regexp.MustCompile(`(?i)[\\@]deprecated\b|(^|[.!]\s+)Deprecated\b`)

// isDeprecated reports whether a doc comment marks its enumerator deprecated: a doxygen
// \deprecated command, or (the CUdevice_attribute convention) a sentence that starts with
// "Deprecated".
func isDeprecated(doc string) bool { return deprecatedRE.MatchString(doc) }

var (
	deprecatedCmdRE = regexp.MustCompile(`(?i)[\\@]deprecated\b\s*`)
	doxygenCmdRE    = regexp.MustCompile(`[\\@](ref|p|c|e|a|b|em|note|brief|sa|see)\b\s*`)
	resultLeadInRE  = regexp.MustCompile(`(?i)^(this\s+(error\s+)?)?(indicates|indicated|indiciates)\s+(that\s+)?`)
	deprecatedLead  = regexp.MustCompile(`(?i)^deprecated\b[\s,.;:]*`)
	// crossRefRE matches doxygen's "::name" link marker, but not C++ scope ("Type::field").
	crossRefRE = regexp.MustCompile(`(^|[\s(\[])::`)
)

// plainText removes doxygen markup so that the text reads as prose.
func plainText(doc string) string {
	doc = deprecatedCmdRE.ReplaceAllString(doc, "")
	doc = doxygenCmdRE.ReplaceAllString(doc, "")
	doc = crossRefRE.ReplaceAllString(doc, "$1")
	return strings.Join(strings.Fields(doc), " ")
}

// sentences splits prose into sentences, without their final period. A period ends a
// sentence only when followed by a space (or the end) and not part of "e.g." or "i.e.".
func sentences(text string) []string {
	var out []string
	start := 0
	for i := 0; i < len(text); i++ {
		c := text[i]
		if c != '.' && c != '!' && c != '?' {
			continue
		}
		if i+1 < len(text) && text[i+1] != ' ' {
			continue
		}
		lower := strings.ToLower(text[start : i+1])
		if c == '.' && (strings.HasSuffix(lower, "e.g.") || strings.HasSuffix(lower, "i.e.") ||
			strings.HasSuffix(lower, " etc.") || strings.HasSuffix(lower, " vs.")) {
			continue
		}
		if s := strings.TrimSpace(text[start:i]); s != "" {
			out = append(out, s)
		}
		start = i + 1
	}
	if s := strings.TrimSpace(strings.TrimRight(text[start:], ".")); s != "" {
		out = append(out, s)
	}
	return out
}

// shorten cuts s to at most n bytes at a word boundary, marking the cut with "...".
func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := strings.LastIndexByte(s[:n-3], ' ')
	if cut <= 0 {
		cut = n - 3
	}
	return strings.TrimRight(s[:cut], " ,;:") + "..."
}

// capitalize upper-cases the first letter of s when its first word is a plain lower-case
// word, leaving identifiers such as "cuMemCreate" alone.
func capitalize(s string) string {
	word, _, _ := strings.Cut(s, " ")
	if word == "" || strings.IndexFunc(word, func(r rune) bool { return !unicode.IsLower(r) && r != '-' && r != '\'' && r != ',' }) >= 0 {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// description returns the one-line description of e: the first sentence of its doc comment.
func description(e *enumerator, dropLeadIn bool) string {
	ss := sentences(plainText(e.doc))
	if len(ss) == 0 {
		fmt.Fprintf(os.Stderr, "mkcu: warning: %s has no doc comment\n", e.name)
		return capitalize(strings.ToLower(strings.ReplaceAll(e.name, "_", " ")))
	}
	d := ss[0]
	if dropLeadIn {
		d = resultLeadInRE.ReplaceAllString(d, "")
	}
	return shorten(capitalize(d), maxDescription)
}

// deprecationNote returns the text of the "Deprecated:" paragraph for e, or "" when e is not
// deprecated.
func deprecationNote(e *enumerator, desc string, goName func(string) string) string {
	if !e.isPrimary() {
		return "Use [" + goName(e.primary) + "] instead."
	}
	if !e.deprecated {
		return ""
	}
	// Take what the header says after its deprecation marker, minus the sentence that
	// already is the description.
	doc := e.doc
	if loc := deprecatedRE.FindStringIndex(doc); loc != nil {
		doc = strings.TrimLeft(doc[loc[0]:], ".! ")
	}
	doc = deprecatedLead.ReplaceAllString(plainText(doc), "")
	var keep []string
	for _, s := range sentences(doc) {
		if len(keep) == 0 && strings.EqualFold(capitalize(s), desc) {
			continue
		}
		keep = append(keep, capitalize(s)+".")
	}
	note := ""
	for _, s := range keep {
		if note != "" && len(note)+1+len(s) > maxNote {
			break
		}
		note = joinDoc(note, s)
	}
	if note == "" {
		return "Do not use."
	}
	return shorten(note, maxNote)
}

type writer struct{ bytes.Buffer }

func (w *writer) p(format string, args ...any) { fmt.Fprintf(&w.Buffer, format+"\n", args...) }

// command is the command the generated files name.
const command = "go run ./internal/cmd/mkcu -header <cuda.h> -out cu"

func (w *writer) header(version int) { w.headerFrom(version, "") }

// headerFrom starts a generated file: what made it, from which header, and the package
// files it also read.
func (w *writer) headerFrom(version int, from string) {
	if from != "" {
		from = ", cu/" + from
	}
	w.p("// Code generated by \"%s\" (CUDA_VERSION %d%s); DO NOT EDIT.", command, version, from)
	w.p("")
	w.p("package cu")
	w.p("")
}

// doc writes the doc comment of e: its description, and a "Deprecated:" paragraph (which
// tools such as staticcheck and gopls look for) when e is deprecated. A description that
// only says "Deprecated, ..." is left out as the note repeats it; an alias shows the
// description of its primary instead.
func (w *writer) doc(e *enumerator, descs map[string]string, goName func(string) string) {
	desc := descs[e.name]
	note := linkNames(deprecationNote(e, desc, goName), descs, goName)
	if note != "" && deprecatedLead.MatchString(desc) {
		desc = ""
		if !e.isPrimary() && !deprecatedLead.MatchString(descs[e.primary]) {
			desc = descs[e.primary]
		}
	}
	if desc != "" {
		if !strings.HasSuffix(desc, "...") {
			desc += "."
		}
		desc = linkNames(desc, descs, goName)
		w.p("\t// %s", desc)
		if note != "" {
			w.p("\t//")
		}
	}
	if note != "" {
		w.p("\t// Deprecated: %s", note)
	}
}

var upperNameRE = regexp.MustCompile(`\b[A-Z][A-Z0-9_]+\b`)

// linkNames turns the C names of enumerators (the keys of descs) mentioned in text into Go
// doc links to their constants.
func linkNames(text string, descs map[string]string, goName func(string) string) string {
	return upperNameRE.ReplaceAllStringFunc(text, func(name string) string {
		if _, ok := descs[name]; !ok {
			return name
		}
		return "[" + goName(name) + "]"
	})
}

func (w *writer) gofmt() ([]byte, error) {
	out, err := format.Source(w.Bytes())
	if err != nil {
		return nil, fmt.Errorf("generated code does not parse: %w", err)
	}
	return out, nil
}

// checkUnique fails on a Go name that two enumerators map to.
func checkUnique(names map[string]string, goName, cName string) error {
	if other, dup := names[goName]; dup {
		return fmt.Errorf("%s and %s both map to Go name %s", other, cName, goName)
	}
	names[goName] = cName
	return nil
}

func emitResults(version int, entries []*enumerator) ([]byte, error) {
	const prefix = "CUDA_"
	goName := func(c string) string { return strings.TrimPrefix(c, prefix) }
	used := make(map[string]string)
	descs := make(map[string]string, len(entries))

	var w writer
	w.header(version)
	w.p("// Result codes of the driver API, one per CUresult enumerator: the C name less %q.", prefix)
	for _, e := range entries {
		descs[e.name] = description(e, true)
	}
	w.p("const (")
	for _, e := range entries {
		if !strings.HasPrefix(e.name, prefix) {
			return nil, fmt.Errorf("%s lacks the %s prefix", e.name, prefix)
		}
		if err := checkUnique(used, goName(e.name), e.name); err != nil {
			return nil, err
		}
		w.doc(e, descs, goName)
		w.p("\t%s Result = %d", goName(e.name), e.value)
	}
	w.p(")")
	w.p("")

	emitLookup(&w, "resultName", "r Result", "the C name of r", entries, goName,
		func(e *enumerator) string { return e.name })
	emitLookup(&w, "resultDescription", "r Result", "the one-line description of r", entries, goName,
		func(e *enumerator) string { return descs[e.name] })
	return w.gofmt()
}

func emitAttributes(version int, entries []*enumerator) ([]byte, error) {
	const prefix = "CU_"
	const sentinel = "CU_DEVICE_ATTRIBUTE_MAX"
	goName := func(c string) string { return strings.TrimPrefix(c, prefix) }
	used := make(map[string]string)
	descs := make(map[string]string, len(entries))

	var attrs []*enumerator
	var max *enumerator
	for _, e := range entries {
		if e.name == sentinel {
			max = e
			continue
		}
		attrs = append(attrs, e)
	}

	var w writer
	w.header(version)
	w.p("// Device attributes, one per CUdevice_attribute enumerator: the C name less %q.", prefix)
	for _, e := range attrs {
		descs[e.name] = description(e, false)
	}
	w.p("const (")
	for _, e := range attrs {
		if !strings.HasPrefix(e.name, prefix) {
			return nil, fmt.Errorf("%s lacks the %s prefix", e.name, prefix)
		}
		if err := checkUnique(used, goName(e.name), e.name); err != nil {
			return nil, err
		}
		w.doc(e, descs, goName)
		w.p("\t%s DeviceAttribute = %d", goName(e.name), e.value)
	}
	w.p(")")
	w.p("")
	if max != nil {
		w.p("// deviceAttributeMax is %s: one past the largest attribute this header knows.", sentinel)
		w.p("const deviceAttributeMax DeviceAttribute = %d", max.value)
		w.p("")
	}

	var primaries []*enumerator
	for _, e := range attrs {
		if e.isPrimary() {
			primaries = append(primaries, e)
		}
	}
	sort.SliceStable(primaries, func(i, j int) bool { return primaries[i].value < primaries[j].value })
	w.p("// allAttributes holds every attribute once, under its primary name, in ascending order.")
	w.p("var allAttributes = []DeviceAttribute{")
	for _, e := range primaries {
		w.p("\t%s,", goName(e.name))
	}
	w.p("}")
	w.p("")

	emitLookup(&w, "attributeName", "a DeviceAttribute", "the C name of a", attrs, goName,
		func(e *enumerator) string { return e.name })
	emitLookup(&w, "attributeDescription", "a DeviceAttribute", "the one-line description of a", attrs, goName,
		func(e *enumerator) string { return descs[e.name] })
	return w.gofmt()
}

// emitLookup writes `func fn(param) (string, bool)` as a switch over the primary enumerators,
// which the compiler turns into a binary search or jump table.
func emitLookup(w *writer, fn, param, what string, entries []*enumerator, goName func(string) string, text func(*enumerator) string) {
	arg := strings.Fields(param)[0]
	w.p("// %s returns %s, and false when %s is not a known value.", fn, what, arg)
	w.p("func %s(%s) (string, bool) {", fn, param)
	w.p("\tswitch %s {", arg)
	for _, e := range entries {
		if !e.isPrimary() {
			continue
		}
		w.p("\tcase %s:", goName(e.name))
		w.p("\t\treturn %s, true", strconv.Quote(text(e)))
	}
	w.p("\t}")
	w.p("\treturn \"\", false")
	w.p("}")
	w.p("")
}
