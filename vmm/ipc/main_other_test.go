//go:build !linux

package ipc_test

func runChildIfRequested() {}
