//go:build !linux

package sim_test

func runShareChildIfRequested()  {}
func runFabricChildIfRequested() {}
