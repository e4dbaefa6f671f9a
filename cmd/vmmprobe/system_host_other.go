//go:build !unix

package main

import "io/fs"

// deviceMajor is 0 here: device numbers are a Unix notion.
func deviceMajor(path string, fi fs.FileInfo) uint32 { return 0 }

// oNonblock: there is no non-blocking open here.
const oNonblock = 0
