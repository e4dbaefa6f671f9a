package ipc_test

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	runChildIfRequested()
	runPidfdChildIfRequested()
	os.Exit(m.Run())
}
