package cu

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
	"unsafe"

	"github.com/cuvmm/cuvmm/internal/guard"
	"github.com/cuvmm/cuvmm/loader"
	"github.com/ebitengine/purego"
)

// Module is a module loaded into a context (CUmodule): PTX, a cubin or a fatbin. Its
// functions are launched with [Context.Launch] on the same context. It is safe for
// concurrent use; Unload waits for launches in progress.
type Module struct {
	ctx *Context
	h   uintptr // CUmodule

	g  guard.Guard // Function and Launch calls in flight; Unload drains them
	mu sync.Mutex  // serializes Unload
}

// Function is a kernel of a loaded module (CUfunction). The zero Function is not a kernel:
// launching it is an error.
type Function struct {
	mod  *Module
	h    uintptr // CUfunction
	name string
}

// Name is the kernel's name as it was looked up.
func (f Function) Name() string { return f.name }

// Module is the module f belongs to (nil for the zero Function).
func (f Function) Module() *Module { return f.mod }

// ModuleLoadData loads a module into the context (cuModuleLoadData): PTX text, which the
// driver JIT-compiles for the context's device, or a cubin or fatbin image. The driver reads
// a NUL-terminated image; ModuleLoadData passes a copy with the NUL appended, so image
// need not carry one. Unload the module with [Module.Unload].
func (c *Context) ModuleLoadData(image []byte) (*Module, error) {
	if len(bytes.TrimRight(image, "\x00")) == 0 {
		return nil, wrap(invalidArg("cu: empty module image"), "cuModuleLoadData", "%d bytes", len(image))
	}
	img := make([]byte, len(image)+1)
	copy(img, image)
	var h uintptr
	err := c.Do(func() error {
		var err error
		if h, err = cuModuleLoadData(unsafe.Pointer(&img[0])); err != nil {
			return wrap(err, "cuModuleLoadData", "%d bytes, device %d", len(image), c.dev)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &Module{ctx: c, h: h}, nil
}

// Function looks up the kernel called name (cuModuleGetFunction): the name as the module
// declares it (`.entry name` in PTX; the mangled name for an un-extern'd C++ kernel). A name
// the module does not have is ERROR_NOT_FOUND.
func (m *Module) Function(name string) (Function, error) {
	if m == nil || m.h == 0 {
		return Function{}, wrap(invalidArg("cu: nil or zero Module"), "cuModuleGetFunction", "%q", name)
	}
	if name == "" || strings.IndexByte(name, 0) >= 0 {
		return Function{}, wrap(invalidArg("cu: empty kernel name or one with a NUL byte"), "cuModuleGetFunction", "%q", name)
	}
	if !m.g.Enter(0) {
		return Function{}, wrap(ErrModuleUnloaded, "cuModuleGetFunction", "%q", name)
	}
	defer m.g.Exit()
	cname := append([]byte(name), 0)
	var h uintptr
	err := m.ctx.Do(func() error {
		var err error
		if h, err = cuModuleGetFunction(m.h, unsafe.Pointer(&cname[0])); err != nil {
			return wrap(err, "cuModuleGetFunction", "%q", name)
		}
		return nil
	})
	if err != nil {
		return Function{}, err
	}
	return Function{mod: m, h: h, name: name}, nil
}

// Unload unloads the module (cuModuleUnload). Its Functions can no longer be launched. It
// is idempotent; after a failed Unload, a later one tries again.
func (m *Module) Unload() error {
	if m == nil || m.h == 0 {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.g.Drain() {
		return nil
	}
	if err := m.ctx.Do(func() error {
		if err := cuModuleUnload(m.h); err != nil {
			return wrap(err, "cuModuleUnload", "device %d", m.ctx.dev)
		}
		return nil
	}); err != nil {
		m.g.Reopen()
		return err
	}
	m.g.Retire()
	return nil
}

// ErrModuleUnloaded is returned for a Module, or a Function of one, after its Unload,
// instead of handing the driver a freed handle.
var ErrModuleUnloaded = errors.New("cu: module unloaded")

// Launch runs kernel f on a grid of grid[0]×grid[1]×grid[2] blocks of
// block[0]×block[1]×block[2] threads, with sharedMem bytes of dynamic shared memory, on the
// legacy default stream (cuLaunchKernel), and waits for it to finish (cuCtxSynchronize), so
// that a fault in the kernel is reported here and its results are visible to the copies
// that follow. f must come from a module loaded into this context.
//
// args are the kernel's parameters in order. Each is one of DevicePtr, uint32, int32,
// uint64, int64, float32 or float64, and must be the type the kernel declares (.u64 for a
// pointer, .u32/.s32, .u64/.s64, .f32, .f64 in PTX): the driver copies as many bytes as the
// kernel's parameter has. Go's int, uint and uintptr are refused (their size is the
// platform's, not the kernel's), as is any other type.
func (c *Context) Launch(f Function, grid, block [3]uint32, sharedMem uint32, args ...any) error {
	desc := func() string {
		return fmt.Sprintf("%s, grid %v, block %v, shared %d, %d args", f.label(), grid, block, sharedMem, len(args))
	}
	if f.mod == nil || f.h == 0 {
		return &Error{Op: "cuLaunchKernel", Args: desc(), Err: invalidArg("cu: zero Function")}
	}
	if slices.Contains(grid[:], 0) || slices.Contains(block[:], 0) {
		return &Error{Op: "cuLaunchKernel", Args: desc(), Err: invalidArg("cu: a grid or block dimension is 0")}
	}
	ka, err := newKernelArgs(args)
	if err != nil {
		return &Error{Op: "cuLaunchKernel", Args: desc(), Err: err}
	}
	if c == nil {
		return &Error{Op: "cuLaunchKernel", Args: desc(), Err: ErrContextReleased}
	}
	if f.mod.ctx == nil || f.mod.ctx.h != c.h {
		return &Error{Op: "cuLaunchKernel", Args: desc(), Err: invalidArg(fmt.Sprintf("cu: kernel of another context launched on device %d", c.dev))}
	}
	if !f.mod.g.Enter(0) {
		return &Error{Op: "cuLaunchKernel", Args: desc(), Err: ErrModuleUnloaded}
	}
	defer f.mod.g.Exit()

	// kernelParams points into ka.mem, Go memory that the driver reads during the call. It
	// is pinned for the call, as the rules for passing Go memory to C require of memory
	// whose address is stored in memory handed to C, and kept alive past the call.
	var pin runtime.Pinner
	defer pin.Unpin()
	params := ka.params(&pin)
	return c.Do(func() error {
		if err := cuLaunchKernel(f.h, grid[0], grid[1], grid[2], block[0], block[1], block[2],
			sharedMem, 0 /* legacy default stream */, params, 0 /* extra */); err != nil {
			runtime.KeepAlive(ka)
			return wrap(err, "cuLaunchKernel", "%s", desc())
		}
		runtime.KeepAlive(ka)
		if err := cuCtxSynchronize(); err != nil {
			return wrap(err, "cuLaunchKernel", "%s (synchronize)", desc())
		}
		return nil
	})
}

func (f Function) label() string {
	if f.name == "" {
		return "<zero function>"
	}
	return f.name
}

// callN is call for entry points with more than the six integer arguments syscall6 takes
// (cuLaunchKernel has eleven). It goes through purego.SyscallN on every platform. Like call
// it is not //go:uintptrescapes: pointer arguments must point to heap memory the caller
// keeps alive (and, if it holds pointers the driver follows, pinned) for the call.
func callN(p *loader.Proc, args ...uintptr) error {
	addr, err := p.Addr()
	if err != nil {
		return symbolErr(err)
	}
	r, _, _ := purego.SyscallN(addr, args...)
	return resultOf(r)
}

// kernelArgs is a kernel's parameters in the form cuLaunchKernel takes them: kernelParams
// is an array of n pointers, the i-th pointing to the value of parameter i. Both live in
// one heap allocation, mem: words [0, n) are the pointers and word n+i holds parameter i,
// little or big end alike: each value is stored through a pointer of its own type at the
// start of its 8-byte slot, which is aligned for every supported type.
type kernelArgs struct {
	mem   []uint64
	sizes []uintptr // the size in bytes of each value
}

func newKernelArgs(args []any) (*kernelArgs, error) {
	n := len(args)
	ka := &kernelArgs{mem: make([]uint64, 2*n), sizes: make([]uintptr, n)}
	for i, a := range args {
		slot := unsafe.Pointer(&ka.mem[n+i])
		switch v := a.(type) {
		case DevicePtr:
			*(*uint64)(slot), ka.sizes[i] = uint64(v), 8
		case uint64:
			*(*uint64)(slot), ka.sizes[i] = v, 8
		case int64:
			*(*int64)(slot), ka.sizes[i] = v, 8
		case uint32:
			*(*uint32)(slot), ka.sizes[i] = v, 4
		case int32:
			*(*int32)(slot), ka.sizes[i] = v, 4
		case float32:
			*(*uint32)(slot), ka.sizes[i] = math.Float32bits(v), 4
		case float64:
			*(*uint64)(slot), ka.sizes[i] = math.Float64bits(v), 8
		case nil:
			return nil, invalidArg(fmt.Sprintf("cu: kernel argument %d is nil", i))
		default:
			return nil, invalidArg(fmt.Sprintf("cu: kernel argument %d has type %T: want DevicePtr, uint32, int32, uint64, int64, float32 or float64", i, a))
		}
	}
	return ka, nil
}

// params pins mem, fills in the pointer words and returns the kernelParams argument: the
// address of the pointer array, or 0 (NULL) for a kernel without parameters.
func (ka *kernelArgs) params(pin *runtime.Pinner) uintptr {
	n := len(ka.sizes)
	if n == 0 {
		return 0
	}
	pin.Pin(&ka.mem[0])
	for i := range n {
		ka.mem[i] = uint64(uintptr(unsafe.Pointer(&ka.mem[n+i])))
	}
	return uintptr(unsafe.Pointer(&ka.mem[0]))
}
