package loader

import (
	"path/filepath"

	"golang.org/x/sys/windows"
)

type winSource struct {
	handle windows.Handle
	getPA
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
		why := ""
		if !builtin || filepath.Base(p) != p {
			flags = windows.LOAD_WITH_ALTERED_SEARCH_PATH
			// A pipe, a directory or a device (CON, NUL) is refused before LoadLibraryEx
			// opens and reads it (regular.go).
			why = notRegular(p)
		}
		if why == "" {
			h, err := windows.LoadLibraryEx(p, 0, flags)
			if err == nil {
				s.handle = h
				return p, nil
			}
			why = err.Error()
		}
		le.Tried = append(le.Tried, p)
		le.Reasons = append(le.Reasons, why)
	}
	return "", le
}

func (s *winSource) lookup(name string) (uintptr, error) {
	return windows.GetProcAddress(s.handle, name)
}

func (s *winSource) hasGetProcAddress() bool {
	fn, _ := windows.GetProcAddress(s.handle, "cuGetProcAddress_v2")
	s.getPA = getPA(fn)
	return fn != 0
}
