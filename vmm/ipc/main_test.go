package ipc_test

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	runChildIfRequested()
	runDmaBufChildIfRequested()
	os.Exit(m.Run())
}
