package loader

import (
	"golang.org/x/sys/windows"
)

type winSource struct {
	handle windows.Handle
	getPA  uintptr
}

func systemSource() source { return &winSource{} }

func (*winSource) defaultPaths() []string { return []string{"nvcuda.dll"} }

func (s *winSource) open(paths []string) (string, error) {
	le := &LoadError{}
	for _, p := range paths {
		// The default name is looked up in System32 only, so a DLL planted in the working
		// directory or on PATH is never loaded. An explicit override is taken as given.
		var flags uintptr = windows.LOAD_LIBRARY_SEARCH_SYSTEM32
		if p != "nvcuda.dll" {
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
			s.getPA, _ = windows.GetProcAddress(h, "cuGetProcAddress_v2")
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

func (s *winSource) hasGetProcAddress() bool { return s.getPA != 0 }

func (s *winSource) getProcAddress(name string, version int, flags uint64) (uintptr, int32, int32) {
	return callGetProcAddress(s.getPA, name, version, flags)
}
