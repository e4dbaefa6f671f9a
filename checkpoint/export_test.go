package checkpoint

import "io/fs"

// SetRoot makes p read /proc from fsys.
func SetRoot(p *Process, fsys fs.FS) { p.root = fsys }
