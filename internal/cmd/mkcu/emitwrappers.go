package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// zwrappers.go, the exported wrappers of the //cu:export lines, and vmm's zcuda.go, the
// CUDA forwarders of the Backend methods marked with the function of package cu they call.

// vmmFile is the file of package vmm that mkcu writes, relative to package cu.
const vmmFile = "../vmm/zcuda.go"

// emitWrappers writes zwrappers.go. A wrapper looks for an optional symbol first (its
// absence is the error whatever the arguments), calls Init unless it takes a handle or a
// device (which only an initialized driver gives), and names the call and its arguments in
// the error, only on failure (formatting allocates). It takes a struct the driver reads by
// value, so that there is no nil pointer to check. The generated function returns zero outs
// on failure, and so does the wrapper.
func emitWrappers(version int, calls []*call) ([]byte, error) {
	var w writer
	w.header("cu", version, "cu/"+protoFile)
	for _, c := range calls {
		x := c.wrapper
		if x == nil {
			continue
		}
		var params []param
		var args []string
		recv, outs, init := "", "", true
		for i, q := range c.params {
			switch {
			case q.kind == kindOut:
				outs += q.name + ", "
				continue
			case i == x.recv:
				recv = "(" + q.name + " " + q.typ + ") "
			case q.kind == kindIn: // a struct the wrapper takes by value: nothing to be nil
				params = append(params, param{name: q.name, typ: q.typ})
				args = append(args, "&"+q.name)
				continue
			default:
				params = append(params, q)
			}
			args = append(args, q.name)
			init = init && q.typ != handleType && q.typ != "Device"
		}
		format := strings.Join(append([]string{x.format}, x.args...), ", ")
		w.p("%s", strings.Join(x.doc, "\n"))
		w.p("func %s%s(%s) %s {", recv, x.name, goParams(params), goResults(c))
		if c.optional {
			w.p("\tif err = %s.Find(); err != nil {\n\t\treturn %swrap(symbolErr(err), %q, %s)\n\t}", procName(c.symbol), outs, c.symbol, format)
		}
		if init {
			w.p("\tif err = Init(); err != nil {\n\t\treturn\n\t}")
		}
		w.p("\tif %serr = %s(%s); err != nil {\n\t\terr = wrap(err, %q, %s)\n\t}\n\treturn\n}\n", outs, c.goName, strings.Join(args, ", "), c.symbol, format)
	}
	return w.gofmt()
}

// forwardRE matches a method of vmm.Backend, on one line, that ends with what its forwarder
// calls: its name, parameters, results and the function of package cu, or the method of
// cu.Device or cu.Context.
var forwardRE = regexp.MustCompile(`(?m)^\t([A-Z]\w*)\(([^)]*)\) (.+) // cu\.((?:Device\.|Context\.)?[A-Z]\w*)$`)

// emitForwarders writes zcuda.go from vmm's backend.go: for each method marked with what it
// calls, a forwarder that passes it its arguments. A parameter called ordinal is the
// cu.Device of that ordinal (cudaBackend.dev), or the receiver: the device of a Device
// method, the device's primary context (cudaBackend.ctx) of a Context method.
func emitForwarders(version int, pkgDir string) ([]byte, error) {
	const from = "vmm/backend.go"
	src, err := os.ReadFile(filepath.Join(pkgDir, "..", from))
	if err != nil {
		return nil, err
	}
	var w writer
	w.header("vmm", version, from)
	w.p("import \"github.com/cuvmm/cuvmm/cu\"\n")
	for _, m := range forwardRE.FindAllStringSubmatch(string(src), -1) {
		conv, fn := "dev", "cu."+m[4]
		typ, method, isMethod := strings.Cut(m[4], ".")
		if typ == "Context" {
			conv = "ctx"
		}
		if isMethod {
			fn = conv + "." + method
		}
		var args []string
		ordinal := false
		for _, p := range strings.Split(m[2], ", ") {
			if f := strings.Fields(p); len(f) > 0 && f[0] == "ordinal" {
				ordinal = true
				if !isMethod {
					args = append(args, conv)
				}
			} else if len(f) > 0 {
				args = append(args, f[0])
			}
		}
		results := strings.Split(strings.Trim(m[3], "()"), ", ")
		switch {
		case results[len(results)-1] != "error":
			return nil, fmt.Errorf("%s: Backend.%s: a forwarder returns an error last", from, m[1])
		case isMethod && !ordinal:
			return nil, fmt.Errorf("%s: Backend.%s: %s needs a device: the method has no parameter called ordinal", from, m[1], m[4])
		case !ordinal:
			w.p("func (b *cudaBackend) %s(%s) %s {\n\treturn %s(%s)\n}\n", m[1], m[2], m[3], fn, strings.Join(args, ", "))
			continue
		}
		for i := range results {
			results[i] = "_ " + results[i] // named, for the bare return of the ordinal's error
		}
		results[len(results)-1] = "err error"
		w.p("func (b *cudaBackend) %s(%s) (%s) {\n\t%s, err := b.%s(ordinal)\n\tif err != nil {\n\t\treturn\n\t}\n\treturn %s(%s)\n}\n",
			m[1], m[2], strings.Join(results, ", "), conv, conv, fn, strings.Join(args, ", "))
	}
	return w.gofmt()
}
