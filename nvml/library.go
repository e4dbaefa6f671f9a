package nvml

import (
	"github.com/cuvmm/cuvmm/loader"
	"github.com/ebitengine/purego"
)

// library is where the calls of this package go: NVML through the loader, or, in tests, a
// fake whose entry points are Go functions made callable from C.
type library struct {
	addr func(*loader.Proc) (uintptr, error) // the entry point of a proc
	path func() string                       // the file NVML was loaded from
}

var system = &library{addr: (*loader.Proc).Addr, path: nvmlLib.Path}

// call calls the entry point of p with args and returns its nvmlReturn_t as an error (nil
// for NVML_SUCCESS), or why p could not be called. Being //go:uintptrescapes, it makes the
// compiler move what every uintptr(unsafe.Pointer(x)) argument points to onto the heap and
// keep it alive until call returns, as syscall.Syscall does: NVML only writes through the
// pointers during the call, and nothing here keeps them after it.
//
//go:uintptrescapes
func (l *library) call(p *loader.Proc, args ...uintptr) error {
	fn, err := l.addr(p)
	if err != nil {
		return symbolErr(err)
	}
	if fn == 0 { // purego panics on a nil function; a fake must not get there either
		return symbolErr(&loader.SymbolError{Name: p.Symbol().Name, Status: loader.SymbolNotFound})
	}
	r, _, _ := purego.SyscallN(fn, args...)
	// nvmlReturn_t is a C enum: only the low 32 bits of the register are defined.
	if ret := Return(int32(uint32(r))); ret != SUCCESS {
		return ret
	}
	return nil
}

// Every NVML entry point this package calls, by its export name. Where nvml.h maps a name
// to a versioned one (#define nvmlInit nvmlInit_v2, ...), the versioned export is the one
// whose signature the call here is written for.
var (
	nvmlLib = loader.NVML()

	procInit                         = nvmlLib.NewProc(loader.Symbol{Name: "nvmlInit_v2"})
	procShutdown                     = nvmlLib.NewProc(loader.Symbol{Name: "nvmlShutdown"})
	procSystemGetDriverVersion       = nvmlLib.NewProc(loader.Symbol{Name: "nvmlSystemGetDriverVersion"})
	procSystemGetCudaDriverVersion   = nvmlLib.NewProc(loader.Symbol{Name: "nvmlSystemGetCudaDriverVersion_v2"})
	procDeviceGetCount               = nvmlLib.NewProc(loader.Symbol{Name: "nvmlDeviceGetCount_v2"})
	procDeviceGetHandleByIndex       = nvmlLib.NewProc(loader.Symbol{Name: "nvmlDeviceGetHandleByIndex_v2"})
	procDeviceGetName                = nvmlLib.NewProc(loader.Symbol{Name: "nvmlDeviceGetName"})
	procDeviceGetUUID                = nvmlLib.NewProc(loader.Symbol{Name: "nvmlDeviceGetUUID"})
	procDeviceGetPciInfo             = nvmlLib.NewProc(loader.Symbol{Name: "nvmlDeviceGetPciInfo_v3"})
	procDeviceGetGpuFabricInfoV      = nvmlLib.NewProc(loader.Symbol{Name: "nvmlDeviceGetGpuFabricInfoV"})
	procDeviceGetGpuFabricInfo       = nvmlLib.NewProc(loader.Symbol{Name: "nvmlDeviceGetGpuFabricInfo"})
	procDeviceGetNvLinkState         = nvmlLib.NewProc(loader.Symbol{Name: "nvmlDeviceGetNvLinkState"})
	procDeviceGetNvLinkRemoteDevType = nvmlLib.NewProc(loader.Symbol{Name: "nvmlDeviceGetNvLinkRemoteDeviceType"})
)

// Symbols lists every NVML entry point this package may call, with its resolution state
// once resolved; for tools that report what a node's NVML provides.
func Symbols() []*loader.Proc { return nvmlLib.Procs() }
