// Command mkcu generates the driver-call layer of package cu from the CUDA driver header
// and cu/prototypes.go, in the manner of golang.org/x/sys/unix's mkerrors and mksyscall:
// the header is parsed once by a maintainer and the result is checked in, so building the
// binding never needs the CUDA toolkit.
//
// Usage (normally through go generate in package cu):
//
//	go run ./internal/cmd/mkcu -header /usr/local/cuda/include/cuda.h -out cu
//
// It reads the //cu lines of cu/prototypes.go (one per driver call; that file says what
// they mean), checks each against the function cuda.h declares (number of parameters,
// which are pointers, the size of every value and pointee, on the Go side from package
// cu's own declarations) and, given cudaTypedefs.h (-typedefs, or beside the header), the
// ABI version against its PFN_<name> macro. A disagreement fails generation with a message
// naming the symbol. It writes:
//
//   - zprocs.go: the proc table, one entry per driver symbol, with its ABI version and the
//     suffixed export cuda.h maps it to (#define cuMemAlloc cuMemAlloc_v2).
//   - zcalls.go: one unexported function per prototype that lays out the call's frame
//     (frame.go), pins handle arguments in the handle table, makes the call and returns
//     its outs (emitcalls.go says how).
//   - zvmmtypes.go: the enums and #define constants the //cu:enum and //cu:define lines
//     name.
//   - zwrappers.go: the exported wrappers of the //cu:export lines (emitwrappers.go).
//   - ../vmm/zcuda.go: vmm's CUDA forwarders, one per method of the Backend interface
//     (vmm/backend.go) whose line ends with the function of package cu it calls.
//   - zresult.go: one Result constant per CUresult enumerator (the C name less "CUDA_") and
//     the name and description lookups behind Result's methods. The constants are the only
//     names of the results: errors.Is(err, cu.ERROR_OUT_OF_MEMORY), as NVML's Go binding
//     spells its own.
//   - zattribute.go: one DeviceAttribute constant per CUdevice_attribute enumerator (the C
//     name less "CU_"), the name and description lookups, and allAttributes.
//
// Descriptions are the first sentence of each enumerator's doxygen comment, with the
// doxygen markup ("::" cross-references, \ref and the like) removed and whitespace collapsed,
// so they read well in an error message. For CUresult the boilerplate lead-in ("This
// indicates that", "This error indicates that") is dropped too: what is left is the part a
// reader of "CUDA_ERROR_X: ..." needs.
//
// Several enumerators can share one value: CUdevice_attribute keeps deprecated spellings next
// to the names that replaced them. All of them become constants, but the lookups need one
// name per value, the "primary": the first one in the group that is not deprecated, or the
// first one when all are. The other names get a "Deprecated: Use [PRIMARY] instead." note.
package main

import (
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
)

// maxDescription bounds a description so that an error message stays on one line.
const maxDescription = 160

// maxNote bounds the text of a "Deprecated:" note in a generated doc comment.
const maxNote = 200

// generatedFiles are the files mkcu writes into package cu (and vmm, beside it).
var generatedFiles = map[string]bool{
	"zresult.go": true, "zattribute.go": true, "zprocs.go": true, "zcalls.go": true, "zvmmtypes.go": true,
	"zwrappers.go": true, vmmFile: true,
}

func main() {
	header := flag.String("header", "/usr/local/cuda/include/cuda.h", "path of the CUDA driver header `cuda.h`")
	typedefs := flag.String("typedefs", "", "path of `cudaTypedefs.h`, to check the prototypes' ABI versions (default: cudaTypedefs.h beside -header, if it is there)")
	out := flag.String("out", "cu", "`directory` of package cu: "+protoFile+" is read from it, the generated files are written into it (and vmm's into ../vmm)")
	flag.Parse()
	if flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "mkcu: unexpected arguments:", flag.Args())
		flag.Usage()
		os.Exit(2)
	}
	if err := run(*header, *typedefs, *out, *out); err != nil {
		fmt.Fprintln(os.Stderr, "mkcu:", err)
		os.Exit(1)
	}
}

// run generates from the header at headerPath and package cu in pkgDir (and vmm beside it)
// into the directory out (and ../vmm). typedefsPath may be empty: then cudaTypedefs.h beside the header is used if it exists,
// and the ABI versions are not checked if it does not.
func run(headerPath, typedefsPath, pkgDir, out string) error {
	src, err := os.ReadFile(headerPath)
	if err != nil {
		return err
	}
	explicit := typedefsPath != ""
	if !explicit {
		typedefsPath = filepath.Join(filepath.Dir(headerPath), "cudaTypedefs.h")
	}
	typedefs, err := os.ReadFile(typedefsPath)
	if !explicit && errors.Is(err, os.ErrNotExist) {
		typedefs, err = nil, nil // the versions go unchecked
	}
	if err != nil {
		return err
	}
	files, err := generate(src, typedefs, pkgDir)
	if err != nil {
		return fmt.Errorf("%s: %w", headerPath, err)
	}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if err := os.WriteFile(filepath.Join(out, name), files[name], 0o644); err != nil {
			return err
		}
	}
	return nil
}

// generate returns the generated files, by base name, for the header text src, the text of
// cudaTypedefs.h (nil when there is none) and package cu in pkgDir.
func generate(src, typedefs []byte, pkgDir string) (map[string][]byte, error) {
	version, err := cudaVersion(src)
	if err != nil {
		return nil, err
	}
	results, err := parseEnum(src, "cudaError_enum", "CUresult")
	if err != nil {
		return nil, err
	}
	attrs, err := parseEnum(src, "CUdevice_attribute_enum", "CUdevice_attribute")
	if err != nil {
		return nil, err
	}
	zresult, err := emitEnumFile(version, results, "CUresult", "CUDA_", "Result", "Result codes of the driver API", "r", "result")
	if err != nil {
		return nil, fmt.Errorf("zresult.go: %w", err)
	}
	zattr, err := emitEnumFile(version, attrs, "CUdevice_attribute", "CU_", "DeviceAttribute", "Device attributes", "a", "attribute")
	if err != nil {
		return nil, fmt.Errorf("zattribute.go: %w", err)
	}
	files := map[string][]byte{"zresult.go": zresult, "zattribute.go": zattr}

	protos, err := readProtos(pkgDir)
	if err != nil {
		return nil, err
	}
	pkg, err := readGoPackage(pkgDir, generatedFiles)
	if err != nil {
		return nil, err
	}
	h, err := parseCHeader(src)
	if err != nil {
		return nil, err
	}
	if files["zvmmtypes.go"], err = emitVMMTypes(version, src, h, protos.enums, pkg); err != nil {
		return nil, fmt.Errorf("zvmmtypes.go: %w", err)
	}
	var pfn map[string]int
	if typedefs != nil {
		pfn = pfnVersions(typedefs)
	}
	calls, err := checkCalls(protos, h, pkg, pfn)
	if err != nil {
		return nil, err
	}
	fs, err := readFrameShape(pkg)
	if err != nil {
		return nil, err
	}
	if files["zcalls.go"], err = emitCalls(version, calls, fs); err != nil {
		return nil, fmt.Errorf("zcalls.go: %w", err)
	}
	if files["zprocs.go"], err = emitProcs(version, calls); err != nil {
		return nil, fmt.Errorf("zprocs.go: %w", err)
	}
	if files["zwrappers.go"], err = emitWrappers(version, calls); err != nil {
		return nil, fmt.Errorf("zwrappers.go: %w", err)
	}
	if files[vmmFile], err = emitForwarders(version, pkgDir); err != nil {
		return nil, fmt.Errorf("%s: %w", vmmFile, err)
	}
	return files, nil
}

// readFrameShape reads frameWords (frame.go) and maxSyscallArgs (syscall.go) from package cu.
func readFrameShape(pkg *goPackage) (frameShape, error) {
	var fs frameShape
	for name, v := range map[string]*int{"frameWords": &fs.words, "maxSyscallArgs": &fs.maxArgs} {
		lit, ok := pkg.consts[name]
		if !ok {
			return fs, fmt.Errorf("package cu has no constant %s with a literal value", name)
		}
		n, err := strconv.Atoi(lit)
		if err != nil {
			return fs, fmt.Errorf("%s = %s: %w", name, lit, err)
		}
		*v = n
	}
	return fs, nil
}

var cudaVersionRE = regexp.MustCompile(`(?m)^\s*#\s*define\s+CUDA_VERSION\s+(\d+)\b`)

// cudaVersion returns the header's CUDA_VERSION. It goes into the generated header comment so
// that a stale file can be told apart from a file generated from another toolkit.
func cudaVersion(src []byte) (int, error) {
	m := cudaVersionRE.FindSubmatch(src)
	if m == nil {
		return 0, errors.New("no #define CUDA_VERSION: not a CUDA driver header")
	}
	return strconv.Atoi(string(m[1]))
}
