package main

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// zresult.go and zattribute.go: the CUresult and CUdevice_attribute enums.

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
