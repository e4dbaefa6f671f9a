package main

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// The files of constants from cuda.h: zresult.go and zattribute.go, a whole enum each
// (emitEnumFile), and zvmmtypes.go, the enums and #define constants that prototypes.go's
// //cu:enum and //cu:define lines name. Each constant of zvmmtypes.go is the C name less
// "CU_"; an enum's typedef'd sentinel (<PREFIX>_MAX = 0x7FFFFFFF, there to make the enum 32
// bits wide) is left out.

// enumTypeUnderlying is the Go type of a C enum (C enums are int).
const enumTypeUnderlying = "int32"

// enumTag finds the tag of `typedef enum <tag> { ... } <typedef>;`, and the doc comment
// before it.
func enumTag(src []byte, typedef string) (tag, doc string, err error) {
	re := regexp.MustCompile(`(?s)(/\*\*((?:[^*]|\*[^/])*)\*/\s*)?typedef\s+enum\s+(\w+)\s*\{[^}]*\}\s*` + regexp.QuoteMeta(typedef) + `\s*;`)
	m := re.FindSubmatch(src)
	if m == nil {
		return "", "", fmt.Errorf("no enum typedef'd %s in the header", typedef)
	}
	return string(m[3]), cleanComment(string(m[2])), nil
}

// defineDoc returns the doc comment right before `#define name`.
func defineDoc(src []byte, name string) string {
	re := regexp.MustCompile(`(?s)/\*\*((?:[^*]|\*[^/])*)\*/\s*#\s*define\s+` + regexp.QuoteMeta(name) + `\b`)
	if m := re.FindSubmatch(src); m != nil {
		return cleanComment(string(m[1]))
	}
	return ""
}

// constValue is how a constant's value is written: as the header writes it when that is a
// number, in decimal otherwise.
func constValue(text string, v int64) string {
	if _, err := parseInt(text); err == nil {
		return strings.TrimRight(strings.TrimSpace(text), "uUlL")
	}
	return strconv.FormatInt(v, 10)
}

// emitVMMTypes writes zvmmtypes.go and declares the enum types in pkg, so that the prototypes
// can use them.
func emitVMMTypes(version int, src []byte, h *cHeader, lines []*enumLine, pkg *goPackage) ([]byte, error) {
	var w writer
	w.header("cu", version, "cu/"+protoFile)
	goName := func(c string) string { return strings.TrimPrefix(c, "CU_") }
	used := map[string]string{}
	for _, l := range lines {
		where := fmt.Sprintf("prototypes.go:%d", l.line)
		if l.cEnum == "" {
			w.p("// cuda.h's #define %s.", strings.Join(l.macros, ", "))
			w.p("const (")
			for _, m := range l.macros {
				v, ok := h.macros[m]
				if !ok {
					return nil, fmt.Errorf("%s: cuda.h has no #define %s", where, m)
				}
				n, err := parseInt(v)
				if err != nil {
					return nil, fmt.Errorf("%s: #define %s %s is not a number", where, m, v)
				}
				if err := checkUnique(used, goName(m), m); err != nil {
					return nil, fmt.Errorf("%s: %w", where, err)
				}
				if ss := sentences(plainText(defineDoc(src, m))); len(ss) > 0 {
					w.p("\t// %s.", shorten(capitalize(ss[0]), maxDescription))
				}
				w.p("\t%s = %s", goName(m), constValue(v, n))
			}
			w.p(")")
			w.p("")
			continue
		}
		tag, doc, err := enumTag(src, l.cEnum)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		entries, err := parseEnum(src, tag, l.cEnum)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		typ := ""
		if l.goType != "" {
			typ = " " + l.goType
			w.p("// %s is a %s.", l.goType, l.cEnum)
			if ss := sentences(plainText(doc)); len(ss) > 0 {
				w.p("//")
				w.p("// cuda.h: %s.", ss[0])
			}
			w.p("type %s %s", l.goType, enumTypeUnderlying)
			w.p("")
			pkg.define(l.goType, enumTypeUnderlying)
		} else if ss := sentences(plainText(doc)); len(ss) > 0 {
			w.p("// %s (%s), untyped.", ss[0], l.cEnum)
		}
		descs := map[string]string{}
		for _, e := range entries {
			if e.doc != "" {
				descs[e.name] = description(e, false)
			}
		}
		w.p("const (")
		for _, e := range entries {
			if strings.HasSuffix(e.name, "_MAX") && e.value == 0x7FFFFFFF {
				continue // it only makes the enum 32 bits wide
			}
			if !strings.HasPrefix(e.name, "CU_") {
				return nil, fmt.Errorf("%s: %s lacks the CU_ prefix", where, e.name)
			}
			if err := checkUnique(used, goName(e.name), e.name); err != nil {
				return nil, fmt.Errorf("%s: %w", where, err)
			}
			desc := linkNames(descs[e.name], descs, goName)
			note := ""
			if e.deprecated {
				note = linkNames(deprecationNote(e, descs[e.name], goName), descs, goName)
				if strings.TrimSuffix(note, ".") == desc || deprecatedLead.MatchString(desc) {
					desc = ""
				}
			}
			w.comment(desc, note)
			w.p("\t%s%s = %s", goName(e.name), typ, constValue(e.valueText, e.value))
		}
		w.p(")")
		w.p("")
	}
	return w.gofmt()
}

// emitEnumFile writes zresult.go or zattribute.go: one constant of Go type typ per
// enumerator of the C enum cEnum (the C name less prefix), and the lookups <fn>Name and
// <fn>Description of a typ called arg. CUresult's descriptions drop their boilerplate
// lead-in; CUdevice_attribute's sentinel becomes deviceAttributeMax, and its primaries
// allAttributes.
func emitEnumFile(version int, entries []*enumerator, cEnum, prefix, typ, what, arg, fn string) ([]byte, error) {
	const sentinel = "CU_DEVICE_ATTRIBUTE_MAX"
	goName := func(c string) string { return strings.TrimPrefix(c, prefix) }
	used := make(map[string]string)
	descs := make(map[string]string, len(entries))

	var consts []*enumerator
	var max *enumerator
	for _, e := range entries {
		if e.name == sentinel {
			max = e
			continue
		}
		consts = append(consts, e)
	}

	var w writer
	w.header("cu", version, "")
	w.p("// %s, one per %s enumerator: the C name less %q.", what, cEnum, prefix)
	for _, e := range consts {
		descs[e.name] = description(e, typ == "Result")
	}
	w.p("const (")
	for _, e := range consts {
		if !strings.HasPrefix(e.name, prefix) {
			return nil, fmt.Errorf("%s lacks the %s prefix", e.name, prefix)
		}
		if err := checkUnique(used, goName(e.name), e.name); err != nil {
			return nil, err
		}
		w.doc(e, descs, goName)
		w.p("\t%s %s = %d", goName(e.name), typ, e.value)
	}
	w.p(")")
	w.p("")

	if typ == "DeviceAttribute" {
		if max != nil {
			w.p("// deviceAttributeMax is %s: one past the largest attribute this header knows.", sentinel)
			w.p("const deviceAttributeMax DeviceAttribute = %d", max.value)
			w.p("")
		}
		var primaries []*enumerator
		for _, e := range consts {
			if e.isPrimary() {
				primaries = append(primaries, e)
			}
		}
		slices.SortStableFunc(primaries, func(a, b *enumerator) int { return cmp.Compare(a.value, b.value) })
		w.p("// allAttributes holds every attribute once, under its primary name, in ascending order.")
		w.p("var allAttributes = []DeviceAttribute{")
		for _, e := range primaries {
			w.p("\t%s,", goName(e.name))
		}
		w.p("}")
		w.p("")
	}

	// The lookups switch over the primary enumerators, which the compiler turns into a
	// binary search or jump table.
	for _, l := range []struct {
		name, what string
		text       func(*enumerator) string
	}{
		{fn + "Name", "the C name of " + arg, func(e *enumerator) string { return e.name }},
		{fn + "Description", "the one-line description of " + arg, func(e *enumerator) string { return descs[e.name] }},
	} {
		w.p("// %s returns %s, and false when %s is not a known value.", l.name, l.what, arg)
		w.p("func %s(%s %s) (string, bool) {", l.name, arg, typ)
		w.p("\tswitch %s {", arg)
		for _, e := range consts {
			if e.isPrimary() {
				w.p("\tcase %s:", goName(e.name))
				w.p("\t\treturn %s, true", strconv.Quote(l.text(e)))
			}
		}
		w.p("\t}")
		w.p("\treturn \"\", false")
		w.p("}")
		w.p("")
	}
	return w.gofmt()
}
