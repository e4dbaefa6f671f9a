//go:build !linux

package main

// hostIMEX returns nil: IMEX channels exist only on Linux.
func hostIMEX() *imexState { return nil }
