package nvml

import (
	"encoding/binary"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/cuvmm/cuvmm/loader"
	"github.com/ebitengine/purego"
)

// fakeNVML is NVML as a test scripts it. Its entry points are Go functions made callable
// from C with purego.NewCallback, so a call goes through the same purego.SyscallN, with the
// same pointers, as a call into libnvidia-ml. They write their results at the byte offsets
// of nvml.h's structs, not through this package's Go structs, so a layout mistake here
// shows up as a wrong value.
type fakeNVML struct {
	absent  bool            // the library cannot be loaded
	missing map[string]bool // entry points the library lacks

	initRet     Return
	driver      string
	cudaVersion int32
	countRet    Return
	count       uint32 // 0: len(gpus)
	gpus        []fakeGPU

	mu             sync.Mutex
	inits          int
	shutdowns      int
	fabricVersions []uint32 // the version field of each nvmlDeviceGetGpuFabricInfoV call
	bufSizes       map[string]uintptr
}

type fakeGPU struct {
	handleRet Return
	name      string
	uuid      string
	busID     string

	// nvmlDeviceGetGpuFabricInfoV: its result, and whether it knows v2 only.
	fabricRet    Return
	fabricV2Only bool
	oldFabricRet Return // nvmlDeviceGetGpuFabricInfo
	cluster      [16]byte
	status       Return
	clique       uint32
	state        FabricState
	health       HealthMask
	summary      HealthSummary

	links    []fakeLink // link numbers beyond these are NVML_ERROR_INVALID_ARGUMENT
	linksRet Return     // if set, every link returns it
}

type fakeLink struct {
	active    bool
	remote    NvLinkDeviceType
	remoteRet Return
}

// current is the fake the callbacks serve; tests that use a fake do not run in parallel.
var current atomic.Pointer[fakeNVML]

// use makes f the NVML that the returned library calls.
func (f *fakeNVML) use(t *testing.T) *library {
	t.Helper()
	current.Store(f)
	t.Cleanup(func() { current.Store(nil) })
	fns := callbacks()
	return &library{
		addr: func(p *loader.Proc) (uintptr, error) {
			name := p.Symbol().Name
			if f.absent {
				return 0, &loader.SymbolError{Name: name, Status: loader.DriverNotLoaded, Err: &loader.LoadError{
					Library: "NVML library",
					Tried:   []string{"libnvidia-ml.so.1"},
					Reasons: []string{"libnvidia-ml.so.1: cannot open shared object file: No such file or directory"},
				}}
			}
			fn, ok := fns[name]
			if !ok || f.missing[name] {
				return 0, &loader.SymbolError{Name: name, Status: loader.SymbolNotFound}
			}
			return fn, nil
		},
		path: func() string {
			if f.absent {
				return ""
			}
			return "/fake/libnvidia-ml.so.1"
		},
	}
}

func cur() *fakeNVML { return current.Load() }

// gpu is the fake GPU of a handle (index + 1), or nil.
func (f *fakeNVML) gpu(h uintptr) *fakeGPU {
	if h == 0 || h > uintptr(len(f.gpus)) {
		return nil
	}
	return &f.gpus[h-1]
}

func (f *fakeNVML) sawBuffer(name string, n uintptr) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.bufSizes == nil {
		f.bufSizes = map[string]uintptr{}
	}
	f.bufSizes[name] = n
}

// mem is n bytes of the caller's memory at addr. The memory is Go's, kept on the heap and
// alive by call's //go:uintptrescapes; the conversion goes through a pointer to addr so
// that vet does not take it for a misuse of unsafe.Pointer.
func mem(addr, n uintptr) []byte {
	return unsafe.Slice(*(**byte)(unsafe.Pointer(&addr)), n)
}

// putString copies s and a NUL into the buffer (addr, n), as NVML does, or returns
// NVML_ERROR_INSUFFICIENT_SIZE.
func putString(addr, n uintptr, s string) uintptr {
	if uintptr(len(s)) >= n {
		return uintptr(ERROR_INSUFFICIENT_SIZE)
	}
	b := mem(addr, n)
	b[copy(b, s)] = 0
	return 0
}

func put32(addr, off uintptr, v uint32) { binary.LittleEndian.PutUint32(mem(addr+off, 4), v) }

// callbacks are made once per process: purego never frees them.
var callbacks = sync.OnceValue(func() map[string]uintptr {
	fns := map[string]any{
		"nvmlInit_v2": func() uintptr {
			f := cur()
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.initRet == SUCCESS {
				f.inits++
			}
			return uintptr(f.initRet)
		},
		"nvmlShutdown": func() uintptr {
			f := cur()
			f.mu.Lock()
			defer f.mu.Unlock()
			f.shutdowns++
			return 0
		},
		"nvmlSystemGetDriverVersion": func(buf, n uintptr) uintptr {
			cur().sawBuffer("nvmlSystemGetDriverVersion", n)
			return putString(buf, n, cur().driver)
		},
		"nvmlSystemGetCudaDriverVersion_v2": func(v uintptr) uintptr {
			put32(v, 0, uint32(cur().cudaVersion))
			return 0
		},
		"nvmlDeviceGetCount_v2": func(v uintptr) uintptr {
			f := cur()
			if f.countRet != SUCCESS {
				return uintptr(f.countRet)
			}
			n := f.count
			if n == 0 {
				n = uint32(len(f.gpus))
			}
			put32(v, 0, n)
			return 0
		},
		"nvmlDeviceGetHandleByIndex_v2": func(i, h uintptr) uintptr {
			f := cur()
			if i >= uintptr(len(f.gpus)) {
				return uintptr(ERROR_INVALID_ARGUMENT)
			}
			if r := f.gpus[i].handleRet; r != SUCCESS {
				return uintptr(r)
			}
			binary.LittleEndian.PutUint64(mem(h, 8), uint64(i+1))
			return 0
		},
		"nvmlDeviceGetName": func(h, buf, n uintptr) uintptr {
			cur().sawBuffer("nvmlDeviceGetName", n)
			return putString(buf, n, cur().gpu(h).name)
		},
		"nvmlDeviceGetUUID": func(h, buf, n uintptr) uintptr {
			cur().sawBuffer("nvmlDeviceGetUUID", n)
			return putString(buf, n, cur().gpu(h).uuid)
		},
		"nvmlDeviceGetPciInfo_v3": func(h, p uintptr) uintptr {
			// nvmlPciInfo_t: busIdLegacy[16] at 0, domain at 16, bus at 20, device at 24,
			// pciDeviceId at 28, pciSubSystemId at 32, busId[32] at 36.
			b := mem(p+36, 32)
			b[copy(b[:31], cur().gpu(h).busID)] = 0
			return 0
		},
		"nvmlDeviceGetGpuFabricInfoV": func(h, p uintptr) uintptr {
			f, g := cur(), cur().gpu(h)
			version := binary.LittleEndian.Uint32(mem(p, 4))
			f.mu.Lock()
			f.fabricVersions = append(f.fabricVersions, version)
			f.mu.Unlock()
			switch {
			case g.fabricRet != SUCCESS:
				return uintptr(g.fabricRet)
			case version == 0x03000028 && !g.fabricV2Only, version == 0x02000024:
			default:
				return uintptr(ERROR_ARGUMENT_VERSION_MISMATCH)
			}
			// nvmlGpuFabricInfo_v2_t: version at 0, clusterUuid[16] at 4, status at 20,
			// cliqueId at 24, state at 28, healthMask at 32; v3 adds healthSummary at 36.
			copy(mem(p+4, 16), g.cluster[:])
			put32(p, 20, uint32(g.status))
			put32(p, 24, g.clique)
			mem(p+28, 1)[0] = byte(g.state)
			put32(p, 32, uint32(g.health))
			if version == 0x03000028 {
				mem(p+36, 1)[0] = byte(g.summary)
			}
			return 0
		},
		"nvmlDeviceGetGpuFabricInfo": func(h, p uintptr) uintptr {
			g := cur().gpu(h)
			if g.oldFabricRet != SUCCESS {
				return uintptr(g.oldFabricRet)
			}
			// nvmlGpuFabricInfo_t: clusterUuid[16] at 0, status at 16, cliqueId at 20,
			// state at 24.
			copy(mem(p, 16), g.cluster[:])
			put32(p, 16, uint32(g.status))
			put32(p, 20, g.clique)
			mem(p+24, 1)[0] = byte(g.state)
			return 0
		},
		"nvmlDeviceGetNvLinkState": func(h, link, p uintptr) uintptr {
			g := cur().gpu(h)
			switch {
			case g.linksRet != SUCCESS:
				return uintptr(g.linksRet)
			case link >= uintptr(len(g.links)):
				return uintptr(ERROR_INVALID_ARGUMENT)
			}
			var v uint32 // NVML_FEATURE_DISABLED
			if g.links[link].active {
				v = 1 // NVML_FEATURE_ENABLED
			}
			put32(p, 0, v)
			return 0
		},
		"nvmlDeviceGetNvLinkRemoteDeviceType": func(h, link, p uintptr) uintptr {
			g := cur().gpu(h)
			if link >= uintptr(len(g.links)) {
				return uintptr(ERROR_INVALID_ARGUMENT)
			}
			l := g.links[link]
			if l.remoteRet != SUCCESS {
				return uintptr(l.remoteRet)
			}
			put32(p, 0, uint32(l.remote))
			return 0
		},
	}
	addrs := make(map[string]uintptr, len(fns))
	for name, fn := range fns {
		addrs[name] = purego.NewCallback(fn)
	}
	return addrs
})
