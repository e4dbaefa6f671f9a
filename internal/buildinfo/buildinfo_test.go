package buildinfo

import (
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"
)

// parse is debug.ParseBuildInfo of lines joined with newlines (fields tab-separated, as
// `go version -m` prints them), with GoVersion from the "go" line, which ParseBuildInfo
// leaves out.
func parse(t *testing.T, lines ...string) *debug.BuildInfo {
	t.Helper()
	bi, err := debug.ParseBuildInfo(strings.Join(lines, "\n") + "\n")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range lines {
		if v, ok := strings.CutPrefix(l, "go\t"); ok {
			bi.GoVersion = v
		}
	}
	return bi
}

func TestFromBuildInfo(t *testing.T) {
	for _, c := range []struct {
		name   string
		bi     func(*testing.T) *debug.BuildInfo
		want   Info
		string string
	}{{
		// go install github.com/cuvmm/cuvmm/cmd/vmmprobe@v1.2.0
		name: "release",
		bi: func(t *testing.T) *debug.BuildInfo {
			return parse(t,
				"go\tgo1.26.8",
				"path\tgithub.com/cuvmm/cuvmm/cmd/vmmprobe",
				"mod\tgithub.com/cuvmm/cuvmm\tv1.2.0\th1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
				"dep\tgithub.com/ebitengine/purego\tv0.11.3\th1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
				"build\t-buildmode=exe",
				"build\tCGO_ENABLED=0",
				"build\tGOARCH=arm64",
				"build\tGOOS=linux",
			)
		},
		want: Info{Path: "github.com/cuvmm/cuvmm/cmd/vmmprobe", Module: "github.com/cuvmm/cuvmm", Version: "v1.2.0",
			GoVersion: "go1.26.8", GOOS: "linux", GOARCH: "arm64"},
		string: "v1.2.0 go1.26.8 linux/arm64",
	}, {
		// go build in a clone with uncommitted changes (as Go 1.26 recorded it)
		name: "clone",
		bi: func(t *testing.T) *debug.BuildInfo {
			return parse(t,
				"go\tgo1.26.8",
				"path\tgithub.com/cuvmm/cuvmm/cmd/vmmprobe",
				"mod\tgithub.com/cuvmm/cuvmm\tv0.0.0-20261123063410-dff8f16a66a7+dirty\t",
				"build\t-buildmode=exe",
				"build\tGOARCH=amd64",
				"build\tGOOS=windows",
				"build\tvcs=git",
				"build\tvcs.revision=dff8f16a66a7d77949caf792689cde51845fd4fb",
				"build\tvcs.time=2026-11-23T06:34:10Z",
				"build\tvcs.modified=true",
			)
		},
		want: Info{Path: "github.com/cuvmm/cuvmm/cmd/vmmprobe", Module: "github.com/cuvmm/cuvmm",
			Version:  "v0.0.0-20261123063410-dff8f16a66a7+dirty",
			Revision: "dff8f16a66a7d77949caf792689cde51845fd4fb", Time: time.Date(2026, 11, 23, 6, 34, 10, 0, time.UTC), Modified: true,
			GoVersion: "go1.26.8", GOOS: "windows", GOARCH: "amd64"},
		string: "v0.0.0-20261123063410-dff8f16a66a7+dirty (commit dff8f16a66a7, 2026-11-23T06:34:10Z, modified) go1.26.8 windows/amd64",
	}, {
		// go build -buildvcs=false, go run
		name: "devel",
		bi: func(t *testing.T) *debug.BuildInfo {
			return parse(t,
				"go\tgo1.25.0",
				"path\tgithub.com/cuvmm/cuvmm/cmd/vmmprobe",
				"mod\tgithub.com/cuvmm/cuvmm\t(devel)\t",
				"build\tGOARCH=arm64",
				"build\tGOOS=darwin",
			)
		},
		want: Info{Path: "github.com/cuvmm/cuvmm/cmd/vmmprobe", Module: "github.com/cuvmm/cuvmm", Version: "(devel)",
			GoVersion: "go1.25.0", GOOS: "darwin", GOARCH: "arm64"},
		string: "(devel) go1.25.0 darwin/arm64",
	}, {
		name:   "none",
		bi:     func(*testing.T) *debug.BuildInfo { return nil },
		want:   Info{Version: "(unknown)", GoVersion: runtime.Version(), GOOS: runtime.GOOS, GOARCH: runtime.GOARCH},
		string: "(unknown) " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH,
	}, {
		// a commit recorded without its time; the platform from package runtime
		name: "revision only",
		bi: func(*testing.T) *debug.BuildInfo {
			return &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "example.com/m", Version: "(devel)"},
				Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789"}, {Key: "vcs.time", Value: "not a time"}}}
		},
		want: Info{Module: "example.com/m", Version: "(devel)", Revision: "0123456789",
			GoVersion: "go1.26.0", GOOS: runtime.GOOS, GOARCH: runtime.GOARCH},
		string: "(devel) (commit 0123456789) go1.26.0 " + runtime.GOOS + "/" + runtime.GOARCH,
	}} {
		t.Run(c.name, func(t *testing.T) {
			got := FromBuildInfo(c.bi(t))
			if got != c.want {
				t.Errorf("FromBuildInfo:\n got %+v\nwant %+v", got, c.want)
			}
			if s := got.String(); s != c.string {
				t.Errorf("String:\n got %q\nwant %q", s, c.string)
			}
		})
	}
}

func TestShortRevision(t *testing.T) {
	for rev, want := range map[string]string{
		"":    "",
		"abc": "abc",
		"dff8f16a66a7d77949caf792689cde51845fd4fb": "dff8f16a66a7",
	} {
		if got := (Info{Revision: rev}).ShortRevision(); got != want {
			t.Errorf("ShortRevision of %q = %q, want %q", rev, got, want)
		}
	}
}

// A test binary records the module it was built in and the toolchain that built it.
func TestRead(t *testing.T) {
	i := Read()
	if i.Module != "github.com/cuvmm/cuvmm" {
		t.Errorf("Module %q, want github.com/cuvmm/cuvmm (%+v)", i.Module, i)
	}
	if i.Version == "" {
		t.Errorf("no Version (%+v)", i)
	}
	if i.GoVersion != runtime.Version() || i.GOOS != runtime.GOOS || i.GOARCH != runtime.GOARCH {
		t.Errorf("built by %s for %s/%s, running %s on %s/%s", i.GoVersion, i.GOOS, i.GOARCH, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	}
}
