package main

import "strings"

// zwrappers.go: the exported wrappers of the //cu:export lines.

// emitWrappers writes zwrappers.go. A wrapper looks for an optional symbol first (its
// absence is the error whatever the arguments), calls Init unless it takes a handle or a
// device (which only an initialized driver gives), and names the call and its arguments in
// the error, only on failure (formatting allocates). It takes a struct the driver reads by
// value, so that there is no nil pointer to check. The generated function returns zero outs
// on failure, and so does the wrapper.
func emitWrappers(version int, calls []*call) ([]byte, error) {
	var w writer
	w.headerFrom(version, protoFile)
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
