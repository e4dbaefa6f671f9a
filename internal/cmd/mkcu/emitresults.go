package main

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

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
		sort.SliceStable(primaries, func(i, j int) bool { return primaries[i].value < primaries[j].value })
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
