package nvml

import "github.com/cuvmm/cuvmm/loader"

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
