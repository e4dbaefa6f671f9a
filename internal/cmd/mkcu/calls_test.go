package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// sampleCalls is the part of a sample header that the prototypes check against: typedefs,
// structs (one with a nested anonymous struct and an array sized by a macro), an opaque
// handle type and functions, with an old declaration after the current one and a
// suffixed export.
const sampleCalls = `
#define CU_HANDLE_SIZE 64
#if defined(_WIN64) || defined(__LP64__)
typedef unsigned long long CUdeviceptr_v2;
#else
typedef unsigned int CUdeviceptr_v2;
#endif
typedef CUdeviceptr_v2 CUdeviceptr;
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef unsigned long long CUmemGenericAllocationHandle;
#define cuMemAlloc cuMemAlloc_v2
#define cuMemsetD8 __CUDA_API_PTDS(cuMemsetD8_v2)

/**
 * Kinds of things.
 */
typedef enum CUthingKind_enum {
    CU_THING_KIND_A = 0x1, /**< The first kind. */
    CU_THING_KIND_B = 0x2, /**< \deprecated use CU_THING_KIND_C instead */
    CU_THING_KIND_C = 0x2, /**< The second kind. */
    CU_THING_KIND_MAX = 0x7FFFFFFF
} CUthingKind;

/**
 * A usage bit.
 */
#define CU_THING_USAGE_BIT 0x4

typedef struct CUthing_st {
    CUthingKind kind;
    int id;
    void *meta;
    struct {
         unsigned char a;
         unsigned char b;
         unsigned short c;
         unsigned char reserved[4];
    } flags;
} CUthing_v1;
typedef CUthing_v1 CUthing;
typedef struct CUblob_st { unsigned char data[CU_HANDLE_SIZE]; } CUblob;

CUresult CUDAAPI cuMemAlloc(CUdeviceptr *dptr, size_t bytesize);
CUresult CUDAAPI cuMemsetD8(CUdeviceptr dstDevice, unsigned char uc, size_t N);
CUresult CUDAAPI cuThingCreate(CUmemGenericAllocationHandle *handle, const CUthing *thing, unsigned long long flags);
CUresult CUDAAPI cuThingUse(CUmemGenericAllocationHandle a, CUmemGenericAllocationHandle b, CUcontext ctx);
CUresult CUDAAPI cuThingSet(CUdeviceptr ptr, const CUthing *things, size_t count);
CUresult CUDAAPI cuThingExport(void *out, CUmemGenericAllocationHandle h);
CUresult CUDAAPI cuThingImport(CUmemGenericAllocationHandle *h, void *blob);
CUresult CUDAAPI cuThingRead(void *dst, CUdeviceptr src, size_t n);
CUresult CUDAAPI cuLaunch(CUcontext f, unsigned int a, unsigned int b, unsigned int c, unsigned int d, unsigned int e, unsigned int g, void **params);
CUresult CUDAAPI cuSync(void);

#if defined(__CUDA_API_VERSION_INTERNAL)
CUresult CUDAAPI cuMemAlloc(unsigned int *dptr, unsigned int bytesize);
#endif
`

const sampleProtos = `package cu

//cu cuMemAlloc(out ptr DevicePtr, size uint64) v3020
//cu:export MemAlloc "%d" size
// MemAlloc allocates size bytes.
//cu cuMemsetD8(dst DevicePtr, value uint8, count uint64) v3020
//cu cuThingCreate(out handle MemHandle, size *Thing, flags uint64) v10020
//cu:export ThingCreate "%+v, %d" size flags
// ThingCreate creates a thing.
//cu cuThingUse(a MemHandle, b MemHandle, ctx uintptr) v10020
//cu cuThingSet(ptr DevicePtr, things []Thing) v10020
//cu cuThingExport as thingExportFD(out fd int32, h MemHandle) v10020
//cu cuThingExport as thingExportBlob(out blob Blob, h MemHandle) v10020
//cu cuThingImport(out h MemHandle, blob *Blob) v10020
//cu cuThingRead(dst unsafe.Pointer, src DevicePtr, n uint64) v10020
//cu cuLaunch(fn uintptr, a uint32, b uint32, c uint32, d uint32, e uint32, g uint32, params uintptr) v4000
//cu cuSync() v2000
//cu cuThingBind_v2(a MemHandle, dev Device, off uint64, b MemHandle, boff uint64, n uint64, flags uint64) v13010 optional
//cu:decl CUresult CUDAAPI cuThingBind_v2(CUmemGenericAllocationHandle a, CUdevice dev, size_t off, CUmemGenericAllocationHandle b, size_t boff, size_t n, unsigned long long flags);
//cu:export Device.Bind "%v+%d, device %d" a off dev
// Bind binds a, from off, for dev:
//
// a second paragraph.
//cu:enum ThingKind CUthingKind
//cu:define CU_THING_USAGE_BIT
`

const sampleTypes = `package cu

import "unsafe"

const frameWords = 8

const maxSyscallArgs = 6

type DevicePtr uint64

type Device int32

type MemHandle uint64

type Thing struct {
	Kind  ThingKind
	ID    int32
	Meta  unsafe.Pointer
	A, B  uint8
	C     uint16
	Res   [4]uint8
}

type Blob [64]byte
`

// sampleBackend is the vmm/backend.go of the sample packages: methods with a forwarder and
// without.
const sampleBackend = `package vmm

import "github.com/cuvmm/cuvmm/cu"

type Backend interface {
	Name() string
	// Alloc is cuMemAlloc.
	Alloc(size uint64) (cu.DevicePtr, error) // cu.MemAlloc
	Memset(ordinal int, dst, src cu.DevicePtr, value uint8) error // cu.Context.MemsetD8
	Bind(a cu.MemHandle, ordinal int, off uint64, h cu.MemHandle, boff, n, flags uint64) error // cu.Device.Bind
	BindAll(a cu.MemHandle, ordinal int, off uint64) (int, bool, error) // cu.ThingBindAll
	Sync(ordinal int) error
}
`

// samplePackage writes package cu, with the given prototypes.go and sampleTypes, and
// package vmm beside it, with the given backend.go; it returns cu's directory.
func samplePackage(t *testing.T, protos string, backend ...string) string {
	dir := t.TempDir()
	files := map[string]string{"cu/" + protoFile: protos, "cu/types.go": sampleTypes, "vmm/backend.go": sampleBackend}
	if len(backend) > 0 {
		files["vmm/backend.go"] = backend[0]
	}
	for name, text := range files {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644))
	}
	return filepath.Join(dir, "cu")
}

func TestGenerateCalls(t *testing.T) {
	files, err := generate([]byte(sample+sampleCalls), nil, samplePackage(t, sampleProtos))
	require.NoError(t, err)
	procs, calls, types := string(files["zprocs.go"]), string(files["zcalls.go"]), string(files["zvmmtypes.go"])
	procs = regexp.MustCompile(` +=`).ReplaceAllString(procs, " =") // gofmt's alignment
	for name, f := range map[string]string{"zprocs.go": procs, "zcalls.go": calls, "zvmmtypes.go": types} {
		require.True(t, strings.HasPrefix(f, "// Code generated by \"go run ./internal/cmd/mkcu -header <cuda.h> -out cu\" (CUDA_VERSION 99000, cu/prototypes.go); DO NOT EDIT.\n"), name)
	}

	// The proc table: one entry per symbol, the export from cuda.h's #define (through the
	// PTDS macro too), the first declaration's parameters (not the old one's).
	require.Contains(t, procs, `procMemAlloc = lib.NewProc(loader.Symbol{Name: "cuMemAlloc", Version: 3020, Export: "cuMemAlloc_v2"})`)
	require.Contains(t, procs, `procMemsetD8 = lib.NewProc(loader.Symbol{Name: "cuMemsetD8", Version: 3020, Export: "cuMemsetD8_v2"})`)
	require.Equal(t, 1, strings.Count(procs, `"cuThingExport"`), "variants share one proc")

	// The frame layout: outs first, then structs; handles pinned; an out handle recorded.
	require.Contains(t, calls, "func cuThingCreate(size *Thing, flags uint64) (handle MemHandle, err error) {")
	require.Contains(t, calls, "\t*(*Thing)(unsafe.Pointer(&f.scratch[1])) = *size\n\tf.ref(1, 1)\n")
	require.Contains(t, calls, `return record(*(*uint64)(unsafe.Pointer(&f.scratch[0])), "cuThingCreate")`)
	require.Contains(t, calls, "pin0, drv0, err := handles.pin(a)")
	require.Contains(t, calls, "pin1, drv1, err := handles.pin(b)")
	require.Contains(t, calls, "f.a[1] = uintptr(drv1)")
	// An array: in the frame when it fits (64 bytes of scratch hold two 24-byte Things).
	require.Contains(t, calls, "if len(things) > 2 {\n\t\terr = callKeep(procThingSet, uintptr(ptr), uintptr(unsafe.Pointer(unsafe.SliceData(things))), uintptr(len(things)))")
	require.Contains(t, calls, "f.a[2] = uintptr(len(things))")
	// A 64-byte out fits the frame; a 64-byte struct with an out does not: callKeep.
	require.Contains(t, calls, "blob = *(*Blob)(unsafe.Pointer(&f.scratch[0]))")
	require.Contains(t, calls, "func cuThingImport(blob *Blob) (h MemHandle, err error) {\n\tkeep0 := new(uint64)\n\tif err = callKeep(procThingImport, uintptr(unsafe.Pointer(keep0)), uintptr(unsafe.Pointer(blob))); err != nil {")
	// Memory the caller owns goes through callKeep; more than six arguments through callN.
	require.Contains(t, calls, "return callKeep(procThingRead, uintptr(dst), uintptr(src), uintptr(n))")
	require.Contains(t, calls, "return callN(procLaunch, uintptr(fn), uintptr(a), uintptr(b), uintptr(c), uintptr(d), uintptr(e), uintptr(g), uintptr(params))")
	require.Contains(t, calls, "func cuSync() (err error) {")
	// Handles pinned for a call through callN; an optional call declared by its //cu:decl
	// line (the header has no cuThingBind_v2), listed by optionalSymbol.
	require.Contains(t, calls, "return callN(procThingBind_v2, uintptr(drv0), uintptr(dev), uintptr(off), uintptr(drv1), uintptr(boff), uintptr(n), uintptr(flags))")
	require.Contains(t, procs, `procThingBind_v2 = lib.NewProc(loader.Symbol{Name: "cuThingBind_v2", Version: 13010})`)
	require.Contains(t, procs, "func optionalSymbol(name string) bool {\n\tswitch name {\n\tcase \"cuThingBind_v2\":\n\t\treturn true\n\t}\n\treturn false\n}")

	// The enum: typed, the size sentinel left out, the deprecated alias marked; the define.
	require.Contains(t, types, "type ThingKind int32")
	require.Contains(t, types, "\t// The first kind.\n\tTHING_KIND_A ThingKind = 0x1\n")
	require.Contains(t, types, "\t// Deprecated: Use [THING_KIND_C] instead.\n\tTHING_KIND_B ThingKind = 0x2\n")
	require.NotContains(t, types, "THING_KIND_MAX")
	require.Contains(t, types, "\t// A usage bit.\n\tTHING_USAGE_BIT = 0x4\n")
}

// A prototype that disagrees with the header fails generation, naming the symbol and saying
// what disagrees.
func TestPrototypeDisagreesWithHeader(t *testing.T) {
	for _, c := range []struct{ line, want string }{
		{"//cu cuMemAlloc(out ptr DevicePtr) v3020", "cuMemAlloc (prototypes.go:3): cuda.h declares 2 parameters, the prototype passes 1"},
		{"//cu cuMemsetD8(dst DevicePtr, value uint32, count uint64) v3020", "cuMemsetD8 (prototypes.go:3): parameter 2 (unsigned char uc in cuda.h) is 1 bytes, uint32 is 4"},
		{"//cu cuMemAlloc(out ptr int32, size uint64) v3020", "cuMemAlloc (prototypes.go:3): parameter 1 (CUdeviceptr * dptr in cuda.h) points to 8 bytes, int32 is 4"},
		{"//cu cuThingCreate(out handle MemHandle, size *Blob, flags uint64) v10020", "cuThingCreate (prototypes.go:3): parameter 2 (const CUthing * thing in cuda.h) points to 24 bytes, Blob is 64"},
		{"//cu cuThingSet(ptr DevicePtr, out things Thing, count uint64) v10020", "points to const: the driver does not write it, so it cannot be out"},
		{"//cu cuThingCreate(handle uint64, size *Thing, flags uint64) v10020", "is a pointer: pass it as *T, out T, []T, unsafe.Pointer or uintptr, not uint64"},
		{"//cu cuThingUse(a MemHandle, b MemHandle, ctx *Thing) v10020", "points to a struct cuda.h does not define: pass the pointer as uintptr"},
		{"//cu cuThingSet(ptr DevicePtr, things []Thing, n uint64) v10020", "cuda.h declares 3 parameters, the prototype passes 4"},
		{"//cu cuNoSuchCall() v10020", "cuNoSuchCall (prototypes.go:3): cuda.h declares no such function"},
		{"//cu cuMemsetD8(dst DevicePtr, value NoType, count uint64) v3020", "parameter value: no type NoType in package cu"},
		{"//cu cuLaunch(fn uintptr, a uint32, b uint32, c uint32, d uint32, e uint32, g uint32, params unsafe.Pointer) v4000", "cuLaunch: 8 arguments go through purego.SyscallN, which takes values (and pinned handles) only; params is not one"},
		// An optional call is checked against its //cu:decl line...
		{"//cu cuThingNew(a MemHandle, dev int64) v13010 optional\n//cu:decl CUresult CUDAAPI cuThingNew(CUmemGenericAllocationHandle a, CUdevice dev);",
			"cuThingNew (prototypes.go:3): parameter 2 (CUdevice dev in the //cu:decl line (prototypes.go:4)) is 4 bytes, int64 is 8"},
		{"//cu cuThingNew(a MemHandle) v13010 optional\n//cu:decl CUresult CUDAAPI cuThingNew(CUmemGenericAllocationHandle a, CUdevice dev);",
			"the //cu:decl line (prototypes.go:4) declares 2 parameters, the prototype passes 1"},
		{"//cu cuThingNew(a MemHandle, dev Nope) v13010 optional\n//cu:decl CUresult CUDAAPI cuThingNew(CUmemGenericAllocationHandle a, CUnope dev);",
			"unknown C type"},
		// ... and, once the header declares it too, the two must agree.
		{"//cu cuMemsetD8(dst DevicePtr, value uint8, count uint64) v3020 optional\n//cu:decl CUresult CUDAAPI cuMemsetD8(CUdeviceptr dstDevice, unsigned int uc, size_t N);",
			"cuMemsetD8 (prototypes.go:3): cuda.h's declaration and the //cu:decl line (prototypes.go:4) disagree: parameter 2 is unsigned char uc, and unsigned int uc"},
		{"//cu cuThingNew(a MemHandle, dev int32) v13010 optional", "cuThingNew (prototypes.go:3): cuda.h declares no such function"},
	} {
		_, err := generate([]byte(sample+sampleCalls), nil, samplePackage(t, "package cu\n\n"+c.line+"\n//cu:enum ThingKind CUthingKind\n"))
		require.ErrorContains(t, err, c.want, c.line)
	}
}

// Given cudaTypedefs.h, the ABI versions are checked against its PFN macros.
func TestPrototypeVersionAgainstTypedefs(t *testing.T) {
	typedefs := []byte(`
#define PFN_cuMemAlloc  PFN_cuMemAlloc_v3020
#define PFN_cuMemsetD8  __API_TYPEDEF_PTDS(PFN_cuMemsetD8, 3020, 7000)
`)
	dir := samplePackage(t, "package cu\n\n//cu cuMemAlloc(out ptr DevicePtr, size uint64) v3020\n//cu cuMemsetD8(dst DevicePtr, value uint8, count uint64) v3020\n")
	_, err := generate([]byte(sample+sampleCalls), typedefs, dir)
	require.NoError(t, err)

	dir = samplePackage(t, "package cu\n\n//cu cuMemsetD8(dst DevicePtr, value uint8, count uint64) v7000\n")
	_, err = generate([]byte(sample+sampleCalls), typedefs, dir)
	require.ErrorContains(t, err, "cuMemsetD8 (prototypes.go:3): the prototype asks for ABI version 7000, but cudaTypedefs.h's PFN_cuMemsetD8 is version 3020")

	dir = samplePackage(t, "package cu\n\n//cu cuSync() v2000\n")
	_, err = generate([]byte(sample+sampleCalls), typedefs, dir)
	require.ErrorContains(t, err, "cuSync (prototypes.go:3): cudaTypedefs.h has no PFN_cuSync")

	// A call with a //cu:decl line is newer than the header, and so than its typedefs: its
	// version is checked only once they have its PFN.
	optional := "package cu\n\n//cu cuThingNew(a MemHandle) v13010 optional\n//cu:decl CUresult CUDAAPI cuThingNew(CUmemGenericAllocationHandle a);\n"
	_, err = generate([]byte(sample+sampleCalls), typedefs, samplePackage(t, optional))
	require.NoError(t, err)
	_, err = generate([]byte(sample+sampleCalls), append(typedefs, "#define PFN_cuThingNew  PFN_cuThingNew_v13020\n"...), samplePackage(t, optional))
	require.ErrorContains(t, err, "cuThingNew (prototypes.go:3): the prototype asks for ABI version 13010, but cudaTypedefs.h's PFN_cuThingNew is version 13020")
}

// A //cu:decl line that agrees with the header's declaration is accepted: the header caught up.
func TestDeclAgreesWithHeader(t *testing.T) {
	dir := samplePackage(t, "package cu\n\n//cu cuMemsetD8(dst DevicePtr, value uint8, count uint64) v3020 optional\n//cu:decl CUresult CUDAAPI cuMemsetD8(CUdeviceptr d, unsigned char v, size_t n);\n")
	files, err := generate([]byte(sample+sampleCalls), nil, dir)
	require.NoError(t, err)
	require.Contains(t, string(files["zprocs.go"]), `case "cuMemsetD8":`)
}

func TestParsePrototypeErrors(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{"//cu cuA(x uint64)", "want //cu <C symbol>[ as <Go name>](<parameters>) v<ABI version>"},
		{"//cu cuA as A(x uint64) v1", "must be unexported"},
		{"//cu cuA(f uint64) v1", `parameter name "f" is taken by the generated code`},
		{"//cu cuA(x uint64, x uint32) v1", "two parameters called x"},
		{"//cu cuA(out h MemHandle, out g MemHandle) v1", "an out MemHandle must be the only out parameter"},
		{"//cu cuA(a []T, b []T) v1", "more than one []T parameter"},
		{"//cu cuA() v1\n//cu cuA() v2", "the Go name cuA is taken by line 1"},
		{"//cu cuA() v1\n//cu cuA as a2() v2", "cuA: version 2, but line 1 says 1"},
		{"//cux cuA() v1", "unknown directive"},
		{"//cu cuA() v1 optional\n//cu cuA as a2() v1", "cuA: optional on one line and not on line 1"},
		{"//cu cuA() v1\n//cu:decl CUresult CUDAAPI cuA(void);", "cuA: only an optional call has a //cu:decl line"},
		{"//cu cuB() v1 optional\n//cu:decl CUresult CUDAAPI cuA(void);", "cuA: a //cu:decl line follows the //cu line of the function it declares"},
		{"//cu cuA() v1 optional\n\n//cu:decl CUresult CUDAAPI cuA(void);", "3: a //cu:decl line goes right after //cu"},
		{"//cu cuA() v1 optional\n//cu:decl int cuA(void);", "want //cu:decl CUresult CUDAAPI"},
		{"//cu cuA() v1 optional\n//cu:decl CUresult CUDAAPI cuA(void);\n//cu cuA as a2() v1 optional\n//cu:decl CUresult CUDAAPI cuA(void);", "cuA: declared already by line 2"},
		{"package cu\n", "no //cu lines"},

		// The exported wrapper.
		{"//cu cuA(x uint64) v1\n//cu:export a \"%d\" x", "2: cuA: want //cu:export <exported name, or Type.Method> \"<format>\" <parameter>...: a \"%d\" x"},
		{"//cu cuA(x uint64) v1\n//cu:export A %d x", "2: cuA: want //cu:export"},
		{"//cu cuA(x uint64) v1\n//cu:export A \"%d x", `2: cuA: the format is not a Go string literal: "%d x`},
		{"//cu cuA(x uint64) v1\n//cu:export A \"%d\" y", "2: cuA: y is not one of its parameters"},
		{"//cu cuA(out x uint64) v1\n//cu:export A \"%d\" x", "2: cuA: x is not one of its parameters (outs are results)"},
		{"//cu cuA(x uint64) v1\n//cu:export Device.A \"%d\" x", "2: cuA: no parameter of type Device is the receiver of Device.A"},
		{"//cu cuA(p unsafe.Pointer) v1\n//cu:export A \"\"", "2: cuA: an exported wrapper takes no unsafe.Pointer (p): write it by hand"},
		{"//cu cuA(x uint64) v1\n//cu:export A \"%d\" x", "1: cuA: A has no doc comment: the comment lines right after its //cu:export line"},
		{"//cu cuA(x uint64) v1\n//cu:export A \"%d\" x\n\n// A does.", "1: cuA: A has no doc comment"},
		{"//cu cuA(x uint64) v1\n//cu:export A \"%d\" x\n// Another.", "3: cuA: the doc comment of A starts with its name"},
		{"//cu cuA() v1\n\n//cu:export A \"\"", "3: a //cu:export line goes right after //cu or //cu:decl"},
		{"//cu cuA() v1\n//cu:export A \"\"\n// A does.\n//cu:export B \"\"", "4: a //cu:export line goes right after //cu or //cu:decl"},
	} {
		_, err := parseProtos(c.src)
		require.ErrorContains(t, err, c.want, c.src)
	}
}

func TestCHeaderShapes(t *testing.T) {
	h, err := parseCHeader([]byte(sampleCalls))
	require.NoError(t, err)
	for typ, size := range map[string]int{
		"CUdeviceptr": 8, "CUdevice": 4, "CUthingKind": 4, "CUthing": 24, "CUblob": 64,
		"CUcontext": 8, "const CUthing *": 8, "unsigned char": 1,
	} {
		s, err := h.shape(typ)
		require.NoError(t, err, typ)
		require.Equal(t, size, s.size, typ)
	}
	s, err := h.shape("const CUthing *")
	require.NoError(t, err)
	require.True(t, s.pointer && s.constElem)
	require.Equal(t, []cParam{{"CUdeviceptr *", "dptr"}, {"size_t", "bytesize"}}, h.funcs["cuMemAlloc"], "the first declaration wins")
	require.Empty(t, h.funcs["cuSync"])
	_, err = h.shape("long")
	require.ErrorIs(t, err, errLongSize)
}

// The exported wrappers of //cu:export lines and the forwarders of the Backend methods
// marked with what they call.
func TestGenerateWrappersAndForwarders(t *testing.T) {
	files, err := generate([]byte(sample+sampleCalls), nil, samplePackage(t, sampleProtos))
	require.NoError(t, err)
	wrappers, forwarders := string(files["zwrappers.go"]), string(files[vmmFile])
	require.True(t, strings.HasPrefix(forwarders, "// Code generated by \"go run ./internal/cmd/mkcu -header <cuda.h> -out cu\" (CUDA_VERSION 99000, vmm/backend.go); DO NOT EDIT.\n\npackage vmm\n\nimport \"github.com/cuvmm/cuvmm/cu\"\n"), forwarders)

	// Init first (it takes neither a handle nor a device); the error names the call and
	// the arguments the line says, only on failure; the outs are named results.
	require.Contains(t, wrappers, `
// MemAlloc allocates size bytes.
func MemAlloc(size uint64) (ptr DevicePtr, err error) {
	if err = Init(); err != nil {
		return
	}
	if ptr, err = cuMemAlloc(size); err != nil {
		err = wrap(err, "cuMemAlloc", "%d", size)
	}
	return
}
`)
	// A method of its first Device parameter; an optional symbol looked for first; no
	// Init (it takes handles and a device); the doc comment as it is.
	require.Contains(t, wrappers, `
// Bind binds a, from off, for dev:
//
// a second paragraph.
func (dev Device) Bind(a MemHandle, off uint64, b MemHandle, boff uint64, n uint64, flags uint64) (err error) {
	if err = procThingBind_v2.Find(); err != nil {
		return wrap(symbolErr(err), "cuThingBind_v2", "%v+%d, device %d", a, off, dev)
	}
	if err = cuThingBind_v2(a, dev, off, b, boff, n, flags); err != nil {
		err = wrap(err, "cuThingBind_v2", "%v+%d, device %d", a, off, dev)
	}
	return
}
`)
	// A struct by value, its address to the call.
	require.Contains(t, wrappers, `
func ThingCreate(size Thing, flags uint64) (handle MemHandle, err error) {
	if err = Init(); err != nil {
		return
	}
	if handle, err = cuThingCreate(&size, flags); err != nil {
		err = wrap(err, "cuThingCreate", "%+v, %d", size, flags)
	}
	return
}
`)
	require.Equal(t, 3, strings.Count(wrappers, "\nfunc "), "no wrapper without a //cu:export line")

	// A plain forwarder, with the method's signature as backend.go spells it; an ordinal
	// becomes the primary context of a Context method, the receiver of a Device method or
	// the Device argument of a function.
	require.Contains(t, forwarders, `
func (b *cudaBackend) Alloc(size uint64) (cu.DevicePtr, error) {
	return cu.MemAlloc(size)
}
`)
	require.Contains(t, forwarders, `
func (b *cudaBackend) Memset(ordinal int, dst, src cu.DevicePtr, value uint8) (err error) {
	ctx, err := b.ctx(ordinal)
	if err != nil {
		return
	}
	return ctx.MemsetD8(dst, src, value)
}
`)
	require.Contains(t, forwarders, "\treturn dev.Bind(a, off, h, boff, n, flags)\n")
	require.Contains(t, forwarders, `
func (b *cudaBackend) BindAll(a cu.MemHandle, ordinal int, off uint64) (_ int, _ bool, err error) {
	dev, err := b.dev(ordinal)
	if err != nil {
		return
	}
	return cu.ThingBindAll(a, dev, off)
}
`)
	require.Equal(t, 4, strings.Count(forwarders, "\nfunc "), "no forwarder for an unmarked method")
}

// A marked method of vmm.Backend must be one that a forwarder can be.
func TestForwarderErrors(t *testing.T) {
	for _, c := range []struct{ method, want string }{
		{"Name() string // cu.Name", "vmm/backend.go: Backend.Name: a forwarder returns an error last"},
		{"Sync() error // cu.Context.Synchronize", "vmm/backend.go: Backend.Sync: Context.Synchronize needs a device: the method has no parameter called ordinal"},
	} {
		backend := "package vmm\n\ntype Backend interface {\n\t" + c.method + "\n}\n"
		_, err := generate([]byte(sample+sampleCalls), nil, samplePackage(t, "package cu\n\n//cu cuSync() v2000\n", backend))
		require.ErrorContains(t, err, c.want, c.method)
	}
}
