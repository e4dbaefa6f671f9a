package main

import (
	"fmt"
	"strconv"
	"strings"
)

// zprocs.go and zcalls.go: the proc table and one function per prototype.
//
// A generated function makes its driver call in one of three ways, picked from what the
// prototype passes:
//
//   - frame: the arguments and the memory they point to (outs, structs, small arrays) in a
//     frame on the caller's stack; nothing is allocated. The proc's address and the call
//     are written out in the function (Proc.Addr and frame.invoke are inlined), so that it
//     is the only Go function between its caller and runtime.cgocall: after a driver call
//     the code and data of every function returned through are cold (frame.go).
//   - keep: through callKeep, when the call takes memory the caller owns (unsafe.Pointer)
//     or what it points to does not fit a frame; outs are allocated.
//   - many: through callN (purego.SyscallN), for more arguments than the trampoline takes;
//     values only.
//
// A []T takes the frame when its elements fit in what the frame has left, and callKeep
// otherwise: the function has both.

type layout int

const (
	layoutFrame layout = iota
	layoutKeep
	layoutMany
)

// frameShape is what the emitter knows of package cu's frame: words of scratch, and the most
// arguments the trampoline passes. mkcu reads both from the package, so the two cannot
// drift apart.
type frameShape struct {
	words, maxArgs int
}

// plan is how one call is laid out.
type plan struct {
	layout layout
	word   []int // scratch word of each out, in and slice parameter (frame layout)
	fit    int   // elements of the []T that fit the frame; 0 when there is none
}

func planCall(c *call, fs frameShape) (plan, error) {
	p := plan{word: make([]int, len(c.params))}
	if c.cArgs() > fs.maxArgs {
		for _, q := range c.params {
			if q.kind != kindValue && q.kind != kindHandle {
				return p, fmt.Errorf("%s: %d arguments go through purego.SyscallN, which takes values (and pinned handles) only; %s is not one", c.symbol, c.cArgs(), q.name)
			}
		}
		p.layout = layoutMany
		return p, nil
	}
	used := 0
	for _, k := range []paramKind{kindOut, kindIn} {
		for i, q := range c.params {
			if q.kind == k {
				p.word[i] = used
				used += (c.sizes[i] + 7) / 8 // in words
			}
		}
	}
	if c.countKind(kindUser) > 0 || used > fs.words {
		p.layout = layoutKeep
		return p, nil
	}
	for i, q := range c.params {
		if q.kind == kindSlice {
			p.word[i] = used
			p.fit = (fs.words - used) * 8 / c.sizes[i]
			if p.fit == 0 {
				p.layout = layoutKeep
			}
		}
	}
	return p, nil
}

// goResults is the result list of c's function.
func goResults(c *call) string {
	var rs []string
	for _, q := range c.params {
		if q.kind == kindOut {
			rs = append(rs, q.name+" "+q.typ)
		}
	}
	return "(" + strings.Join(append(rs, "err error"), ", ") + ")"
}

func goParams(params []param) string {
	var ps []string
	for _, q := range params {
		switch q.kind {
		case kindOut:
		case kindIn:
			ps = append(ps, q.name+" *"+q.typ)
		case kindSlice:
			ps = append(ps, q.name+" []"+q.typ)
		default:
			ps = append(ps, q.name+" "+q.typ)
		}
	}
	return strings.Join(ps, ", ")
}

// cCall renders the C call a function makes, for its doc comment.
func cCall(c *call) string {
	var as []string
	for _, q := range c.params {
		switch q.kind {
		case kindOut:
			as = append(as, "&"+q.name)
		case kindSlice:
			as = append(as, q.name, "len("+q.name+")")
		default:
			as = append(as, q.name)
		}
	}
	return c.symbol + "(" + strings.Join(as, ", ") + ")"
}

// emitCall writes the function of c.
func emitCall(w *writer, c *call, fs frameShape) error {
	p, err := planCall(c, fs)
	if err != nil {
		return err
	}
	how := map[layout]string{layoutFrame: "", layoutKeep: " through callKeep", layoutMany: " through callN"}[p.layout]
	if p.layout == layoutFrame && p.fit > 0 {
		how = fmt.Sprintf(" (through callKeep for more than %d elements of %s)", p.fit, c.slice().name)
	}
	w.p("// %s calls %s%s.", c.goName, cCall(c), how)
	w.p("func %s(%s) %s {", c.goName, goParams(c.params), goResults(c))
	drv := map[int]string{} // the driver value of each handle parameter
	for i, q := range c.params {
		if q.kind != kindHandle {
			continue
		}
		n := len(drv)
		drv[i] = "drv" + strconv.Itoa(n)
		w.p("\tpin%d, drv%d, err := handles.pin(%s)", n, n, q.name)
		w.p("\tif err != nil {")
		w.p("\t\treturn")
		w.p("\t}")
		w.p("\tdefer pin%d.unpin()", n)
	}
	switch p.layout {
	case layoutMany: // values and handles only, as callKeep takes them
		w.p("\treturn callN(%s, %s)", procName(c.symbol), strings.Join(keepArgs(c, drv, nil), ", "))
	case layoutKeep:
		emitKeep(w, c, drv)
	case layoutFrame:
		if p.fit > 0 {
			// The []T fallback: a call with no out parameter.
			w.p("\tif len(%s) > %d {", c.slice().name, p.fit)
			w.p("\t\terr = callKeep(%s, %s)", procName(c.symbol), strings.Join(keepArgs(c, drv, nil), ", "))
			w.p("\t\treturn")
			w.p("\t}")
		}
		emitFrame(w, c, p, drv)
	}
	w.p("}")
	w.p("")
	return nil
}

// keepArgs are the arguments of a callKeep: pointers as uintptr(unsafe.Pointer(x)), which
// callKeep's //go:uintptrescapes keeps alive (and on the heap) for the call.
func keepArgs(c *call, drv map[int]string, outs map[int]string) []string {
	var as []string
	for i, q := range c.params {
		switch q.kind {
		case kindValue, kindUser:
			as = append(as, "uintptr("+q.name+")")
		case kindHandle:
			as = append(as, "uintptr("+drv[i]+")")
		case kindIn:
			as = append(as, "uintptr(unsafe.Pointer("+q.name+"))")
		case kindOut:
			as = append(as, "uintptr(unsafe.Pointer("+outs[i]+"))")
		case kindSlice:
			as = append(as, "uintptr(unsafe.Pointer(unsafe.SliceData("+q.name+")))", "uintptr(len("+q.name+"))")
		}
	}
	return as
}

func emitKeep(w *writer, c *call, drv map[int]string) {
	outs := map[int]string{}
	n := 0
	for i, q := range c.params {
		if q.kind != kindOut {
			continue
		}
		outs[i] = "keep" + strconv.Itoa(n)
		n++
		w.p("\t%s := new(%s)", outs[i], driverType(q))
	}
	if n == 0 {
		w.p("\treturn callKeep(%s, %s)", procName(c.symbol), strings.Join(keepArgs(c, drv, outs), ", "))
		return
	}
	w.p("\tif err = callKeep(%s, %s); err != nil {", procName(c.symbol), strings.Join(keepArgs(c, drv, outs), ", "))
	w.p("\t\treturn")
	w.p("\t}")
	emitOuts(w, c, func(i int) string { return "*" + outs[i] })
}

// emitOuts writes the assignment of the outs (read by read) and the final return.
func emitOuts(w *writer, c *call, read func(i int) string) {
	for i, q := range c.params {
		if q.kind != kindOut {
			continue
		}
		if q.typ == handleType {
			w.p("\treturn record(%s, %q)", read(i), c.symbol)
			return
		}
		w.p("\t%s = %s", q.name, read(i))
	}
	w.p("\treturn")
}

func emitFrame(w *writer, c *call, p plan, drv map[int]string) {
	w.p("\taddr, err := %s.Addr()", procName(c.symbol))
	w.p("\tif err != nil {")
	w.p("\t\terr = symbolErr(err)")
	w.p("\t\treturn")
	w.p("\t}")
	w.p("\tvar f frame")
	w.p("\tf.fn = addr")
	ci := 0
	for i, q := range c.params {
		switch q.kind {
		case kindValue:
			w.p("\tf.a[%d] = uintptr(%s)", ci, q.name)
		case kindHandle:
			w.p("\tf.a[%d] = uintptr(%s)", ci, drv[i])
		case kindIn:
			w.p("\t*(*%s)(unsafe.Pointer(&f.scratch[%d])) = *%s", q.typ, p.word[i], q.name)
			w.p("\tf.ref(%d, %d)", ci, p.word[i])
		case kindOut:
			w.p("\tf.ref(%d, %d)", ci, p.word[i])
		case kindSlice:
			w.p("\tcopy(unsafe.Slice((*%s)(unsafe.Pointer(&f.scratch[%d])), len(%s)), %s)", q.typ, p.word[i], q.name, q.name)
			w.p("\tf.ref(%d, %d)", ci, p.word[i])
			ci++
			w.p("\tf.a[%d] = uintptr(len(%s))", ci, q.name)
		}
		ci++
	}
	w.p("\tif r := f.invoke(); uint32(r) != 0 {")
	w.p("\t\terr = Result(int32(uint32(r)))")
	w.p("\t\treturn")
	w.p("\t}")
	emitOuts(w, c, func(i int) string {
		return fmt.Sprintf("*(*%s)(unsafe.Pointer(&f.scratch[%d]))", driverType(c.params[i]), p.word[i])
	})
}

// driverType is the type of what the driver writes for the out q: an out MemHandle is the
// driver's uint64, which record turns into a handle of cu's.
func driverType(q param) string {
	if q.typ == handleType {
		return "uint64"
	}
	return q.typ
}

// emitCalls writes zcalls.go.
func emitCalls(version int, calls []*call, fs frameShape) ([]byte, error) {
	var w writer
	w.header("cu", version, "cu/"+protoFile)
	w.p("import \"unsafe\"")
	w.p("")
	w.p("// One function per prototype line of %s: each builds its call's frame and makes it,", protoFile)
	w.p("// and returns the driver's result unwrapped (see the file's comment).")
	w.p("")
	for _, c := range calls {
		if err := emitCall(&w, c, fs); err != nil {
			return nil, err
		}
	}
	w.p("// The frame these functions were laid out for (mkcu read it from frame.go and syscall.go).")
	w.p("var (")
	w.p("\t_ [frameWords - %d]struct{}", fs.words)
	w.p("\t_ [%d - frameWords]struct{}", fs.words)
	w.p("\t_ [maxSyscallArgs - %d]struct{}", fs.maxArgs)
	w.p("\t_ [%d - maxSyscallArgs]struct{}", fs.maxArgs)
	w.p(")")
	return w.gofmt()
}

// emitProcs writes zprocs.go: one proc per symbol, in the order of first use.
func emitProcs(version int, calls []*call) ([]byte, error) {
	var w writer
	w.header("cu", version, "cu/"+protoFile)
	w.p("import \"github.com/cuvmm/cuvmm/loader\"")
	w.p("")
	w.p("// Every driver entry point cu calls, with the ABI version its prototype names (that of")
	w.p("// cudaTypedefs.h's PFN_<name>_v<version>) and, where cuda.h maps the name to a suffixed")
	w.p("// export, that export, for drivers without cuGetProcAddress_v2.")
	w.p("var (")
	var optional []string
	seen := map[string]bool{}
	for _, c := range calls {
		if seen[c.symbol] {
			continue
		}
		seen[c.symbol] = true
		export := ""
		if c.export != "" {
			export = fmt.Sprintf(", Export: %q", c.export)
		}
		w.p("\t%s = lib.NewProc(loader.Symbol{Name: %q, Version: %d%s})", procName(c.symbol), c.symbol, c.version, export)
		if c.optional {
			optional = append(optional, strconv.Quote(c.symbol))
		}
	}
	w.p(")")
	w.p("")
	w.p("// optionalSymbol reports whether prototypes.go marks the symbol name optional: drivers")
	w.p("// cuvmm supports may lack it, and cu calls it only where the driver has it.")
	w.p("func optionalSymbol(name string) bool {")
	if len(optional) > 0 {
		w.p("\tswitch name {")
		w.p("\tcase %s:", strings.Join(optional, ", "))
		w.p("\t\treturn true")
		w.p("\t}")
	}
	w.p("\treturn false")
	w.p("}")
	return w.gofmt()
}
