package cu

import "github.com/cuvmm/cuvmm/loader"

// Every driver entry point cu calls, with the ABI version of the signature it is called
// with (cuda.h 13.0, PFN_<name>_v<version> in cudaTypedefs.h) and, where cuda.h maps the
// name to a suffixed export, that export for drivers without cuGetProcAddress_v2.
var (
	lib = loader.Default()

	procInit             = lib.NewProc(loader.Symbol{Name: "cuInit", Version: 2000})
	procDriverGetVersion = lib.NewProc(loader.Symbol{Name: "cuDriverGetVersion", Version: 2020})

	procDeviceGet             = lib.NewProc(loader.Symbol{Name: "cuDeviceGet", Version: 2000})
	procDeviceGetCount        = lib.NewProc(loader.Symbol{Name: "cuDeviceGetCount", Version: 2000})
	procDeviceGetName         = lib.NewProc(loader.Symbol{Name: "cuDeviceGetName", Version: 2000})
	procDeviceGetUuid         = lib.NewProc(loader.Symbol{Name: "cuDeviceGetUuid", Version: 11040, Export: "cuDeviceGetUuid_v2"})
	procDeviceGetPCIBusId     = lib.NewProc(loader.Symbol{Name: "cuDeviceGetPCIBusId", Version: 4010})
	procDeviceTotalMem        = lib.NewProc(loader.Symbol{Name: "cuDeviceTotalMem", Version: 3020, Export: "cuDeviceTotalMem_v2"})
	procDeviceGetAttribute    = lib.NewProc(loader.Symbol{Name: "cuDeviceGetAttribute", Version: 2000})
	procDeviceCanAccessPeer   = lib.NewProc(loader.Symbol{Name: "cuDeviceCanAccessPeer", Version: 4000})
	procDeviceGetP2PAttribute = lib.NewProc(loader.Symbol{Name: "cuDeviceGetP2PAttribute", Version: 8000})

	procDevicePrimaryCtxRetain  = lib.NewProc(loader.Symbol{Name: "cuDevicePrimaryCtxRetain", Version: 7000})
	procDevicePrimaryCtxRelease = lib.NewProc(loader.Symbol{Name: "cuDevicePrimaryCtxRelease", Version: 11000, Export: "cuDevicePrimaryCtxRelease_v2"})
	procCtxSetCurrent           = lib.NewProc(loader.Symbol{Name: "cuCtxSetCurrent", Version: 4000})
	procCtxGetCurrent           = lib.NewProc(loader.Symbol{Name: "cuCtxGetCurrent", Version: 4000})
	procCtxSynchronize          = lib.NewProc(loader.Symbol{Name: "cuCtxSynchronize", Version: 2000})

	procMemGetInfo         = lib.NewProc(loader.Symbol{Name: "cuMemGetInfo", Version: 3020, Export: "cuMemGetInfo_v2"})
	procMemAlloc           = lib.NewProc(loader.Symbol{Name: "cuMemAlloc", Version: 3020, Export: "cuMemAlloc_v2"})
	procMemFree            = lib.NewProc(loader.Symbol{Name: "cuMemFree", Version: 3020, Export: "cuMemFree_v2"})
	procMemcpyHtoD         = lib.NewProc(loader.Symbol{Name: "cuMemcpyHtoD", Version: 3020, Export: "cuMemcpyHtoD_v2"})
	procMemcpyDtoH         = lib.NewProc(loader.Symbol{Name: "cuMemcpyDtoH", Version: 3020, Export: "cuMemcpyDtoH_v2"})
	procMemcpyDtoD         = lib.NewProc(loader.Symbol{Name: "cuMemcpyDtoD", Version: 3020, Export: "cuMemcpyDtoD_v2"})
	procMemsetD8           = lib.NewProc(loader.Symbol{Name: "cuMemsetD8", Version: 3020, Export: "cuMemsetD8_v2"})
	procMemsetD32          = lib.NewProc(loader.Symbol{Name: "cuMemsetD32", Version: 3020, Export: "cuMemsetD32_v2"})
	procMemGetAddressRange = lib.NewProc(loader.Symbol{Name: "cuMemGetAddressRange", Version: 3020, Export: "cuMemGetAddressRange_v2"})

	// Virtual memory management (CUDA 10.2).
	procMemAddressReserve                    = lib.NewProc(loader.Symbol{Name: "cuMemAddressReserve", Version: 10020})
	procMemAddressFree                       = lib.NewProc(loader.Symbol{Name: "cuMemAddressFree", Version: 10020})
	procMemCreate                            = lib.NewProc(loader.Symbol{Name: "cuMemCreate", Version: 10020})
	procMemRelease                           = lib.NewProc(loader.Symbol{Name: "cuMemRelease", Version: 10020})
	procMemMap                               = lib.NewProc(loader.Symbol{Name: "cuMemMap", Version: 10020})
	procMemUnmap                             = lib.NewProc(loader.Symbol{Name: "cuMemUnmap", Version: 10020})
	procMemSetAccess                         = lib.NewProc(loader.Symbol{Name: "cuMemSetAccess", Version: 10020})
	procMemGetAccess                         = lib.NewProc(loader.Symbol{Name: "cuMemGetAccess", Version: 10020})
	procMemExportToShareableHandle           = lib.NewProc(loader.Symbol{Name: "cuMemExportToShareableHandle", Version: 10020})
	procMemImportFromShareableHandle         = lib.NewProc(loader.Symbol{Name: "cuMemImportFromShareableHandle", Version: 10020})
	procMemGetAllocationGranularity          = lib.NewProc(loader.Symbol{Name: "cuMemGetAllocationGranularity", Version: 10020})
	procMemGetAllocationPropertiesFromHandle = lib.NewProc(loader.Symbol{Name: "cuMemGetAllocationPropertiesFromHandle", Version: 10020})
	procMemRetainAllocationHandle            = lib.NewProc(loader.Symbol{Name: "cuMemRetainAllocationHandle", Version: 11000})

	// Multicast objects (CUDA 12.1).
	procMulticastCreate         = lib.NewProc(loader.Symbol{Name: "cuMulticastCreate", Version: 12010})
	procMulticastAddDevice      = lib.NewProc(loader.Symbol{Name: "cuMulticastAddDevice", Version: 12010})
	procMulticastBindMem        = lib.NewProc(loader.Symbol{Name: "cuMulticastBindMem", Version: 12010})
	procMulticastBindAddr       = lib.NewProc(loader.Symbol{Name: "cuMulticastBindAddr", Version: 12010})
	procMulticastUnbind         = lib.NewProc(loader.Symbol{Name: "cuMulticastUnbind", Version: 12010})
	procMulticastGetGranularity = lib.NewProc(loader.Symbol{Name: "cuMulticastGetGranularity", Version: 12010})

	// Modules and kernel launch (module.go). cuLaunchKernel is resolved with the legacy
	// default stream flag, like every symbol here, so stream 0 is the legacy stream.
	procModuleLoadData    = lib.NewProc(loader.Symbol{Name: "cuModuleLoadData", Version: 2000})
	procModuleGetFunction = lib.NewProc(loader.Symbol{Name: "cuModuleGetFunction", Version: 2000})
	procModuleUnload      = lib.NewProc(loader.Symbol{Name: "cuModuleUnload", Version: 2000})
	procLaunchKernel      = lib.NewProc(loader.Symbol{Name: "cuLaunchKernel", Version: 4000})
)

// Symbols lists every driver entry point cu may call, with its resolution state once
// resolved; for tools that report what a driver provides.
func Symbols() []*loader.Proc { return lib.Procs() }
