package vmm_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/vmm"
)

// Errors made of several (a rollback that failed too, retries that failed again) read as one
// line, each part without its package.
func TestCauseOfJoinedErrors(t *testing.T) {
	unmap := &vmm.Error{Op: "unmap", Args: "0x1000+2MiB", Err: cu.ERROR_INVALID_VALUE}
	free := &vmm.Error{Op: "free", Args: "0x1000+2MiB", Err: cu.ERROR_OUT_OF_MEMORY}
	err := &vmm.Error{Pkg: "buffer", Op: "close", Err: errors.Join(unmap, free)}
	inval, oom := cu.ERROR_INVALID_VALUE.Error(), cu.ERROR_OUT_OF_MEMORY.Error()
	want := "buffer: close: unmap 0x1000+2MiB: " + inval + "; free 0x1000+2MiB: " + oom
	if err.Error() != want {
		t.Errorf("got  %s\nwant %s", err, want)
	}
	// An error that wraps several with words between them keeps its words.
	broken := fmt.Errorf("%w: restore: %w", vmm.ErrBroken, unmap)
	err = &vmm.Error{Pkg: "sparse", Op: "decommit", Err: errors.Join(free, broken)}
	want = "sparse: decommit: free 0x1000+2MiB: " + oom + "; broken by a failed rollback: restore: vmm: unmap 0x1000+2MiB: " + inval
	if err.Error() != want {
		t.Errorf("got  %s\nwant %s", err, want)
	}
}
