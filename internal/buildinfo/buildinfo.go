// Package buildinfo reports what the Go toolchain recorded in the running binary about how
// it was built: the main module's version, the commit it was built from and the toolchain,
// for a command's --version.
//
// What is recorded depends on how the binary was built:
//
//   - go install github.com/cuvmm/cuvmm/cmd/vmmprobe@v1.2.0: Version "v1.2.0", no commit
//     (a module download carries no version control data).
//   - go build in a git clone (Go ≥ 1.24): Version from the commit and its tags, a
//     pseudo-version such as "v0.0.0-20261123063410-dff8f16a66a7" where no tag names the
//     commit, with "+dirty" when the clone has uncommitted changes; Revision, Time and
//     Modified from git.
//   - go build -buildvcs=false, go run, go test, or a build outside a clone: Version
//     "(devel)" and no commit.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
	"time"
)

// Info is what the build recorded.
type Info struct {
	// Path is the main package's import path (github.com/cuvmm/cuvmm/cmd/vmmprobe).
	Path string
	// Module is the main module's path (github.com/cuvmm/cuvmm).
	Module string
	// Version is the main module's version: a release, a pseudo-version, "(devel)" when the
	// build recorded none, or "(unknown)" when the binary carries no build information.
	Version string
	// Revision is the commit the binary was built from (vcs.revision), "" when not recorded.
	Revision string
	// Time is the commit's time (vcs.time), zero when not recorded.
	Time time.Time
	// Modified says the clone had uncommitted changes (vcs.modified).
	Modified bool
	// GoVersion is the toolchain that built the binary ("go1.26.8").
	GoVersion string
	// GOOS and GOARCH are the platform it was built for.
	GOOS, GOARCH string
}

// Read returns what the running binary recorded.
func Read() Info {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		bi = nil
	}
	return FromBuildInfo(bi)
}

// FromBuildInfo returns the Info that bi holds. A nil bi (no build information) gives
// Version "(unknown)" and the toolchain and platform of package runtime.
func FromBuildInfo(bi *debug.BuildInfo) Info {
	i := Info{Version: "(unknown)", GoVersion: runtime.Version(), GOOS: runtime.GOOS, GOARCH: runtime.GOARCH}
	if bi == nil {
		return i
	}
	i.Path, i.Module = bi.Path, bi.Main.Path
	if bi.Main.Version != "" {
		i.Version = bi.Main.Version
	}
	if bi.GoVersion != "" {
		i.GoVersion = bi.GoVersion
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			i.Revision = s.Value
		case "vcs.time":
			if t, err := time.Parse(time.RFC3339Nano, s.Value); err == nil {
				i.Time = t
			}
		case "vcs.modified":
			i.Modified = s.Value == "true"
		case "GOOS":
			i.GOOS = s.Value
		case "GOARCH":
			i.GOARCH = s.Value
		}
	}
	return i
}

// ShortRevision is the first 12 hexadecimal digits of Revision, as pseudo-versions show it.
func (i Info) ShortRevision() string {
	if len(i.Revision) > 12 {
		return i.Revision[:12]
	}
	return i.Revision
}

// String is one line for a --version:
//
//	v1.2.0 go1.26.8 linux/amd64
//	v0.0.0-20261123063410-dff8f16a66a7+dirty (commit dff8f16a66a7, 2026-11-23T06:34:10Z, modified) go1.26.8 linux/amd64
func (i Info) String() string {
	var b strings.Builder
	b.WriteString(i.Version)
	if i.Revision != "" {
		fmt.Fprintf(&b, " (commit %s", i.ShortRevision())
		if !i.Time.IsZero() {
			fmt.Fprintf(&b, ", %s", i.Time.UTC().Format(time.RFC3339))
		}
		if i.Modified {
			b.WriteString(", modified")
		}
		b.WriteString(")")
	}
	fmt.Fprintf(&b, " %s %s/%s", i.GoVersion, i.GOOS, i.GOARCH)
	return b.String()
}
