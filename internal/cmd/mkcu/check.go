package main

import (
	"fmt"
	"strings"
)

// call is a prototype checked against the header, with what the emitter needs.
type call struct {
	*proto
	export string   // the suffixed export cuda.h maps the symbol to, or ""
	c      []cParam // the header's parameters
	// sizes of what the Go side passes, by parameter: a value's, or the pointee's for
	// *T, []T and out T
	sizes []int
}

// checkCall checks p against the header's declaration of its symbol and the Go types of
// package cu. Every error names the symbol.
func checkCall(p *proto, h *cHeader, pkg *goPackage, pfn map[string]int, decl *declLine) (*call, error) {
	fail := func(format string, args ...any) (*call, error) {
		return nil, fmt.Errorf("%s (prototypes.go:%d): %s", p.symbol, p.line, fmt.Sprintf(format, args...))
	}
	cps, ok := h.funcs[p.symbol]
	from := "cuda.h" // where the declaration checked against comes from
	switch {
	case ok && decl != nil:
		// The header has caught up with the //cu:decl line: they must agree.
		if err := h.sameParams(cps, decl.params); err != nil {
			return fail("cuda.h's declaration and the //cu:decl line (prototypes.go:%d) disagree: %v", decl.line, err)
		}
	case decl != nil:
		cps, from = decl.params, fmt.Sprintf("the //cu:decl line (prototypes.go:%d)", decl.line)
	case !ok:
		return fail("cuda.h declares no such function")
	}
	if pfn != nil {
		if v, ok := pfn[p.symbol]; !ok && decl == nil {
			return fail("cudaTypedefs.h has no PFN_%s", p.symbol)
		} else if ok && v != p.version {
			return fail("the prototype asks for ABI version %d, but cudaTypedefs.h's PFN_%s is version %d", p.version, p.symbol, v)
		}
	}
	if p.cArgs() != len(cps) {
		return fail("%s declares %d parameters, the prototype passes %d", from, len(cps), p.cArgs())
	}
	c := &call{proto: p, export: h.exports[p.symbol], c: cps, sizes: make([]int, len(p.params))}
	ci := 0
	for i, q := range p.params {
		cp := cps[ci]
		cs, err := h.shape(cp.typ)
		if err != nil {
			return fail("parameter %s: %v", cp.name, err)
		}
		gs, err := pkg.shape(q.typ)
		if err != nil {
			return fail("parameter %s: %v", q.name, err)
		}
		where := fmt.Sprintf("parameter %d (%s %s in %s)", ci+1, cp.typ, cp.name, from)
		var elem cTypeShape
		if cs.pointer {
			if elem, err = h.shape(cs.elem); err != nil {
				return fail("%s: %v", where, err)
			}
		}
		switch q.kind {
		case kindValue:
			switch {
			case cs.pointer && q.typ == "uintptr":
			case cs.pointer && elem.void && gs.integer && gs.size == 8:
				// A number passed as a void * (a device address, a descriptor).
			case cs.pointer:
				return fail("%s is a pointer: pass it as *T, out T, []T, unsafe.Pointer or uintptr, not %s", where, q.typ)
			case !cs.integer || !gs.integer:
				return fail("%s: only integers are passed by value, and %s is not one", where, q.typ)
			case cs.size != gs.size:
				return fail("%s is %d bytes, %s is %d", where, cs.size, q.typ, gs.size)
			}
		case kindHandle:
			if cs.pointer || !cs.integer || cs.size != gs.size {
				return fail("%s is not a %d-byte handle value", where, gs.size)
			}
		case kindIn, kindOut, kindSlice:
			if !cs.pointer {
				return fail("%s is not a pointer: pass it as a value", where)
			}
			if q.kind == kindOut && cs.constElem {
				return fail("%s points to const: the driver does not write it, so it cannot be out", where)
			}
			if elem.opaque {
				return fail("%s points to a struct cuda.h does not define: pass the pointer as uintptr", where)
			}
			if !elem.void && elem.size != gs.size {
				return fail("%s points to %d bytes, %s is %d", where, elem.size, q.typ, gs.size)
			}
			if q.kind == kindSlice && elem.void {
				return fail("%s: a []T needs a typed pointer", where)
			}
			if q.kind == kindSlice {
				ci++
				n := cps[ci]
				ns, err := h.shape(n.typ)
				if err != nil || ns.pointer || !ns.integer {
					return fail("parameter %d (%s %s in %s) follows the []T %s and is not its length", ci+1, n.typ, n.name, from, q.name)
				}
			}
		case kindUser:
			if !cs.pointer {
				return fail("%s is not a pointer: unsafe.Pointer is for memory the driver reads or writes", where)
			}
		}
		c.sizes[i] = gs.size
		ci++
	}
	return c, nil
}

// checkCalls checks every prototype and reports all disagreements at once.
func checkCalls(ps *protoSet, h *cHeader, pkg *goPackage, pfn map[string]int) ([]*call, error) {
	var calls []*call
	var errs []string
	for _, p := range ps.calls {
		c, err := checkCall(p, h, pkg, pfn, ps.decls[p.symbol])
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		calls = append(calls, c)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("prototypes disagree with the header:\n\t%s", strings.Join(errs, "\n\t"))
	}
	return calls, nil
}

// sameParams reports how two declarations of one function differ in what the prototype
// check looks at (the number of parameters, and the shape of each and of what it points
// to), or nil when they do not.
func (h *cHeader) sameParams(a, b []cParam) error {
	if len(a) != len(b) {
		return fmt.Errorf("%d parameters, and %d", len(a), len(b))
	}
	for i := range a {
		x, err := h.paramShape(a[i].typ)
		if err != nil {
			return fmt.Errorf("parameter %d: %w", i+1, err)
		}
		y, err := h.paramShape(b[i].typ)
		if err != nil {
			return fmt.Errorf("parameter %d: %w", i+1, err)
		}
		if x != y {
			return fmt.Errorf("parameter %d is %s %s, and %s %s", i+1, a[i].typ, a[i].name, b[i].typ, b[i].name)
		}
	}
	return nil
}

// paramShape is what the check compares of a parameter's type: its shape and, for a
// pointer, its pointee's.
func (h *cHeader) paramShape(t string) ([2]cTypeShape, error) {
	s, err := h.shape(t)
	if err != nil || !s.pointer {
		return [2]cTypeShape{s}, err
	}
	e, err := h.shape(s.elem)
	s.elem = "" // the pointee's spelling may differ (a typedef of the same type)
	return [2]cTypeShape{s, e}, err
}
