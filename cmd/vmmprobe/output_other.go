//go:build !unix

package main

import "os"

// writeInPlace writes data to an existing file that is not a regular one (NUL, a console),
// opened for writing only, never created or truncated.
func writeInPlace(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
