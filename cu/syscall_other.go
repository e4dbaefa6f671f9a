//go:build !(linux && (amd64 || arm64))

package cu

import "github.com/ebitengine/purego"

// syscall6 is purego.SyscallN on the platforms without the assembly trampoline
// (windows/amd64, darwin, other linux architectures). It allocates, but it follows the
// same memory rule as the fast path (see syscall.go): the callers already hold the
// pointees on the heap and alive, so purego's own //go:uintptrescapes adds nothing here.
func syscall6(fn, a1, a2, a3, a4, a5, a6 uintptr) uintptr {
	r, _, _ := purego.SyscallN(fn, a1, a2, a3, a4, a5, a6)
	return r
}
