package loader

import (
	"path/filepath"

	"golang.org/x/sys/windows"
)

type winSource struct {
	handle windows.Handle
	getPA  uintptr
}

func systemSource() source { return &winSource{} }

func cudaPaths() []string { return []string{"nvcuda.dll"} }

// nvml.dll is in System32 with current drivers; older ones (and some installs) put it in
// NVSMI under Program Files only. The folder comes from the shell, not from %ProgramFiles%,
// which the environment could point anywhere.
func nvmlPaths() []string {
	paths := []string{"nvml.dll"}
	if pf, err := windows.KnownFolderPath(windows.FOLDERID_ProgramFiles, windows.KF_FLAG_DEFAULT); err == nil && filepath.IsAbs(pf) {
		paths = append(paths, filepath.Join(pf, "NVIDIA Corporation", "NVSMI", "nvml.dll"))
	}
	return paths
}

func (s *winSource) open(paths []string, builtin bool) (string, error) {
	le := &LoadError{}
	for _, p := range paths {
		// A platform name without a directory is looked up in System32 only, so a DLL
		// planted in the working directory or on PATH is never loaded. Anything else (an
		// override, a full path) is taken as given, and its dependencies are searched for in
		// its own directory first.
		var flags uintptr = windows.LOAD_LIBRARY_SEARCH_SYSTEM32
		if !builtin || filepath.Base(p) != p {
			flags = windows.LOAD_WITH_ALTERED_SEARCH_PATH
			// A pipe, a directory or a device (CON, NUL) is refused before LoadLibraryEx
			// opens and reads it (regular.go).
			if why := notRegular(p); why != "" {
				le.Tried = append(le.Tried, p)
				le.Reasons = append(le.Reasons, why)
				continue
			}
		}
		h, err := windows.LoadLibraryEx(p, 0, flags)
		if err == nil {
			s.handle = h
			return p, nil
		}
		le.Tried = append(le.Tried, p)
		le.Reasons = append(le.Reasons, err.Error())
	}
	return "", le
}

func (s *winSource) lookup(name string) (uintptr, error) {
	return windows.GetProcAddress(s.handle, name)
}

func (s *winSource) hasGetProcAddress() bool {
	s.getPA, _ = windows.GetProcAddress(s.handle, "cuGetProcAddress_v2")
	return s.getPA != 0
}

func (s *winSource) getProcAddress(name string, version int, flags uint64) (uintptr, int32, int32) {
	return callGetProcAddress(s.getPA, name, version, flags)
}
