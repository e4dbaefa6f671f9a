package ipc_test

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	runChildIfRequested()
	os.Exit(m.Run())
}
