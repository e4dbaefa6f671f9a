// Command kv serves a stream of requests from an elastic KV cache (package kv) as a
// serving loop does: each request gets a slot whose K and V tensors in every layer keep
// their addresses for its whole life, its prompt's bytes are written at once, one token's
// more every step, and when it finishes every byte it wrote is read back from every plane.
// A committer keeps a page ahead of every slot, so the step path should make no driver
// call once warm; the example says how many it made, and that the memory goes back.
//
//	go run ./examples/kv [--backend=auto|cuda|sim] [--preset NAME]
//
// It exits 0 when everything verified, 1 when something did not, 2 on a usage error and 3
// when --backend=cuda finds no driver.
package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/examples/internal/run"
	"github.com/cuvmm/cuvmm/internal/pattern"
	"github.com/cuvmm/cuvmm/internal/units"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/cuvmm/cuvmm/vmm/kv"
)

func main() { run.Main(realMain) }

// A small model: 8 layers x K and V, 2 KiB a token a plane (a 2 MiB page holds 1024
// tokens), 8 requests at once of at most 4096 tokens.
var geometry = kv.Geometry{Planes: 16, BytesPerToken: 2048, Slots: 8, MaxTokens: 4096}

// request is a prompt and the tokens decoded after it.
type request struct{ id, prompt, decode int }

func requests() []request {
	var rs []request
	for i := range 16 {
		rs = append(rs, request{id: i, prompt: 100 + (i*733)%2900, decode: 20 + (i*97)%100})
	}
	return rs
}

func realMain(args []string, stdout, stderr io.Writer) int {
	f, code, ok := run.Parse("kv", args, "h200", stderr, nil)
	if !ok {
		return code
	}
	be, code, err := run.Open("kv", f, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "kv:", err)
		return code
	}
	r := &run.Report{W: stdout}
	fmt.Fprintf(stdout, "kv: backend %s\n", be.Name())
	m := vmm.New(be)
	free0, _, ferr := m.MemInfo(0)
	c, err := kv.New(m, geometry, kv.Options{Ahead: 1})
	if !r.Check(err, "a cache of %d planes x %d slots x %d tokens", geometry.Planes, geometry.Slots, geometry.MaxTokens) {
		return r.Exit()
	}
	r.Check(c.Ready(), "the committer mapped a page ahead in every slot")
	serve(r, m, c)
	st := c.Stats()
	r.Note("pages committed %d (%d by the step path), step-path waits %d, longest %v", st.Commits, st.StepCommits, st.StepWaits, st.StepWaitMax)
	if r.Check(c.Trim(), "trimmed") {
		r.Check(c.Ready(), "the committer mapped the pages it keeps ahead again: %s", units.Size(c.Stats().Bytes))
	}
	r.Check(c.Close(), "closed the cache")
	if st := c.Stats(); st.Bytes != 0 {
		r.Fail("the closed cache still counts %s", units.Size(st.Bytes))
	}
	if free1, _, err := m.MemInfo(0); ferr == nil && err == nil {
		if free1 < free0 {
			r.Fail("device 0 has %s less free memory than before the cache", units.Size(free0-free1))
		} else {
			r.Note("device 0's free memory is back where it was")
		}
	}
	return r.Exit()
}

// serve runs the requests through the slots, one step at a time.
func serve(r *run.Report, m *vmm.Manager, c *kv.Cache) {
	type active struct {
		req    request
		tokens int
	}
	slots := make([]*active, geometry.Slots)
	queue := requests()
	done, warmCalls := 0, -1
	for step := 0; done < len(requests()); step++ {
		for s := range slots {
			a := slots[s]
			if a == nil && len(queue) > 0 {
				a = &active{req: queue[0], tokens: queue[0].prompt}
				queue = queue[1:]
				slots[s] = a
			} else if a != nil {
				a.tokens++
			}
			if a == nil {
				continue
			}
			if err := c.Ensure(s, a.tokens); err != nil {
				r.Fail("step %d: slot %d, request %d: %v", step, s, a.req.id, err)
				return
			}
			first := a.tokens - 1 // the new token, or the whole prompt
			if a.tokens == a.req.prompt {
				first = 0
			}
			if !write(r, m, c, s, a.req, first, a.tokens) {
				return
			}
			if a.tokens == a.req.prompt+a.req.decode {
				if !verify(r, m, c, s, a.req, a.tokens) {
					return
				}
				r.Check(c.Release(s), "request %d: released slot %d", a.req.id, s)
				slots[s], done = nil, done+1
			}
		}
		if step == 2 {
			warmCalls = c.Stats().StepCalls
		}
	}
	if warmCalls >= 0 {
		r.Note("driver calls on the step path after the first steps: %d (prompts longer than the page ahead need pages at once)", c.Stats().StepCalls-warmCalls)
	}
}

// expected is what request req writes for tokens [from, to) in plane p: each token's bytes
// a pattern that starts with the request, the plane and the token, so that bytes in the
// wrong place show.
func expected(req request, p, from, to int) []byte {
	n := int(geometry.BytesPerToken)
	b := make([]byte, 0, (to-from)*n)
	for t := from; t < to; t++ {
		tok := pattern.Bytes(byte(req.id*31+p*7+t), n)
		binary.LittleEndian.PutUint16(tok[0:], uint16(req.id))
		binary.LittleEndian.PutUint16(tok[2:], uint16(p))
		binary.LittleEndian.PutUint32(tok[4:], uint32(t))
		b = append(b, tok...)
	}
	return b
}

func addr(c *kv.Cache, p, slot, token int) cu.DevicePtr {
	return c.Plane(p) + cu.DevicePtr(uint64(slot)*c.SlotBytes()+uint64(token)*geometry.BytesPerToken)
}

// write stores tokens [from, to) of req in every plane of slot.
func write(r *run.Report, m *vmm.Manager, c *kv.Cache, slot int, req request, from, to int) bool {
	for p := range geometry.Planes {
		b := expected(req, p, from, to)
		if err := m.WriteAt(0, b, addr(c, p, slot, from)); err != nil {
			r.Fail("request %d: write tokens %d-%d of plane %d: %v", req.id, from, to, p, err)
			return false
		}
	}
	return true
}

// verify reads back every byte req wrote in every plane of slot.
func verify(r *run.Report, m *vmm.Manager, c *kv.Cache, slot int, req request, tokens int) bool {
	got := make([]byte, tokens*int(geometry.BytesPerToken))
	for p := range geometry.Planes {
		if err := m.ReadAt(0, got, addr(c, p, slot, 0)); err != nil {
			r.Fail("request %d: read plane %d: %v", req.id, p, err)
			return false
		}
		if !bytes.Equal(got, expected(req, p, 0, tokens)) {
			r.Fail("request %d: plane %d of slot %d differs", req.id, p, slot)
			return false
		}
	}
	r.Note("request %d (%d tokens) in slot %d: every byte of its %d planes read back", req.id, tokens, slot, geometry.Planes)
	return true
}
