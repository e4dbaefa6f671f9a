package main

import (
	"runtime"
	"runtime/debug"
)

// version is vmmprobe's version as the Go toolchain recorded it in the binary: the module
// version for `go install ...@vX.Y.Z`, otherwise "(devel)", with the VCS revision (and
// "+dirty" for a modified tree) when the build recorded one (-buildvcs).
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown)"
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev string
	var dirty bool
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if v == "(devel)" && rev != "" {
		v += " " + rev[:min(len(rev), 12)]
		if dirty {
			v += "+dirty"
		}
	}
	return v
}

// versionLine is what --version prints.
func versionLine(v string) string {
	return "vmmprobe " + v + " (" + runtime.Version() + ", " + runtime.GOOS + "/" + runtime.GOARCH + ")"
}
