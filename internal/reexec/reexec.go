// Package reexec starts a program, usually this executable again, as a child process through
// the runner that the parent itself runs under, when one is named.
//
// Tests of other platforms run under an emulator that the kernel does not know about: go test
// -exec qemu-aarch64-static runs an arm64 test binary on amd64, but a child that the binary
// starts with a plain exec fails with "exec format error". The -exec wrapper names its runner
// in EnvRunner, and every child is started through Command, so children run the way their
// parent does. Where the variable is unset (a native run, and any production use) Command is
// exec.Command.
package reexec

import (
	"os"
	"os/exec"
)

// EnvRunner names the program that runs the children (the path of one executable, say
// qemu-aarch64-static). Only an explicit, non-empty value is honoured.
const EnvRunner = "CUVMM_EXEC_RUNNER"

// Command is exec.Command(name, arg...), run by the program named in EnvRunner when it is set.
func Command(name string, arg ...string) *exec.Cmd {
	if r := os.Getenv(EnvRunner); r != "" {
		return exec.Command(r, append([]string{name}, arg...)...)
	}
	return exec.Command(name, arg...)
}
