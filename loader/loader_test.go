package loader

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// fakeSource stands in for dlopen/dlsym and cuGetProcAddress_v2.
type fakeSource struct {
	openable map[string]bool
	exports  map[string]uintptr
	// byProc maps a base name to the highest ABI version the fake driver has and its address.
	byProc map[string]struct {
		version int
		addr    uintptr
	}
	getPA   bool
	paFails bool // cuGetProcAddress returns an error with no status
	opens   atomic.Int32
	builtin atomic.Bool // the last open was of the platform's own names
	gotFlag uint64
	mu      sync.Mutex
}

// testKind is the CUDA driver with the Linux names on every platform, for the fake.
var testKind = &kind{
	what:  "CUDA driver",
	env:   EnvPath,
	paths: func() []string { return []string{"libcuda.so.1", "libcuda.so"} },
	getPA: true,
}

// newLib is a driver library on a fake source.
func newLib(f *fakeSource) *Library { return &Library{kind: testKind, src: f} }

func (f *fakeSource) open(paths []string, builtin bool) (string, error) {
	f.opens.Add(1)
	f.builtin.Store(builtin)
	f.mu.Lock()
	defer f.mu.Unlock()
	le := &LoadError{}
	for _, p := range paths {
		if f.openable[p] {
			return p, nil
		}
		le.Tried = append(le.Tried, p)
		le.Reasons = append(le.Reasons, p+": cannot open shared object file: No such file or directory")
	}
	return "", le
}

// setOpenable makes path loadable or not, as a driver install or removal would.
func (f *fakeSource) setOpenable(path string, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.openable[path] = ok
}

func (f *fakeSource) lookup(name string) (uintptr, error) {
	if a, ok := f.exports[name]; ok {
		return a, nil
	}
	return 0, errors.New("undefined symbol: " + name)
}

func (f *fakeSource) hasGetProcAddress() bool { return f.getPA }

func (f *fakeSource) getProcAddress(name string, version int, flags uint64) (uintptr, int32, int32) {
	f.mu.Lock()
	f.gotFlag = flags
	f.mu.Unlock()
	if f.paFails {
		return 0, 1, 0
	}
	p, ok := f.byProc[name]
	switch {
	case !ok:
		return 0, 500, getProcAddressSymbolNotFound
	case p.version > version:
		// Only a newer ABI exists than the caller asked for... which a real driver returns as
		// success with the newest version <= asked; here: the symbol was introduced later.
		return 0, 500, getProcAddressVersionNotSufficient
	}
	return p.addr, 0, getProcAddressSuccess
}

func newFake() *fakeSource {
	return &fakeSource{
		openable: map[string]bool{"libcuda.so.1": true},
		exports:  map[string]uintptr{"cuInit": 0x1000, "cuMemcpyHtoD_v2": 0x2000},
		byProc: map[string]struct {
			version int
			addr    uintptr
		}{
			"cuInit":            {2000, 0x1100},
			"cuMemCreate":       {10020, 0x1200},
			"cuMulticastCreate": {12010, 0x1300},
		},
		getPA: true,
	}
}

func TestResolveThroughGetProcAddress(t *testing.T) {
	f := newFake()
	l := newLib(f)
	p := l.NewProc(Symbol{Name: "cuMemCreate", Version: 10020})
	addr, err := p.Addr()
	require.NoError(t, err)
	require.Equal(t, uintptr(0x1200), addr)
	require.Equal(t, uint64(legacyStream), f.gotFlag, "legacy stream flag passed explicitly")
	require.True(t, l.UsesGetProcAddress())
	require.Equal(t, "libcuda.so.1", l.Path())
}

func TestMissingSymbolFailsOnlyItself(t *testing.T) {
	l := newLib(newFake())
	missing := l.NewProc(Symbol{Name: "cuNoSuchCall", Version: 12000})
	ok := l.NewProc(Symbol{Name: "cuInit", Version: 2000})
	_, err := missing.Addr()
	require.Error(t, err)
	require.ErrorIs(t, err, ErrNotSupported)
	require.NotErrorIs(t, err, ErrNoDriver)
	require.Contains(t, err.Error(), "cuNoSuchCall")
	var se *SymbolError
	require.ErrorAs(t, err, &se)
	require.Equal(t, SymbolNotFound, se.Status)
	// the error is kept
	_, err2 := missing.Addr()
	require.Same(t, err.(*SymbolError), err2.(*SymbolError))
	addr, err := ok.Addr()
	require.NoError(t, err)
	require.Equal(t, uintptr(0x1100), addr)
}

func TestInsufficientVersion(t *testing.T) {
	f := newFake()
	f.exports["cuMulticastCreate"] = 0x9999 // an export must not be used behind the driver's back
	l := newLib(f)
	p := l.NewProc(Symbol{Name: "cuMulticastCreate", Version: 11000})
	_, err := p.Addr()
	require.ErrorIs(t, err, ErrNotSupported)
	var se *SymbolError
	require.ErrorAs(t, err, &se)
	require.Equal(t, VersionNotSufficient, se.Status)
	require.Contains(t, err.Error(), "version 11000")
}

func TestFallbackToVersionedExport(t *testing.T) {
	f := newFake()
	f.getPA = false
	l := newLib(f)
	p := l.NewProc(Symbol{Name: "cuMemcpyHtoD", Version: 3020, Export: "cuMemcpyHtoD_v2"})
	addr, err := p.Addr()
	require.NoError(t, err)
	require.Equal(t, uintptr(0x2000), addr)
	require.False(t, l.UsesGetProcAddress())

	q := l.NewProc(Symbol{Name: "cuMemCreate", Version: 10020})
	_, err = q.Addr()
	require.ErrorIs(t, err, ErrNotSupported)
	require.Contains(t, err.Error(), "undefined symbol: cuMemCreate")
}

func TestFallbackWhenGetProcAddressErrs(t *testing.T) {
	f := newFake()
	f.paFails = true
	l := newLib(f)
	addr, err := l.NewProc(Symbol{Name: "cuInit", Version: 2000}).Addr()
	require.NoError(t, err)
	require.Equal(t, uintptr(0x1000), addr)
}

func TestLibraryAbsent(t *testing.T) {
	f := newFake()
	f.openable = map[string]bool{}
	l := newLib(f)
	require.ErrorIs(t, l.Load(), ErrNoDriver)
	require.Contains(t, l.Load().Error(), "libcuda.so.1")
	require.Contains(t, l.Load().Error(), "libcuda.so:")
	var le *LoadError
	require.ErrorAs(t, l.Load(), &le)
	require.Equal(t, []string{"libcuda.so.1", "libcuda.so"}, le.Tried)
	require.NotErrorIs(t, l.Load(), ErrUnsupportedPlatform)

	_, err := l.NewProc(Symbol{Name: "cuInit", Version: 2000}).Addr()
	require.ErrorIs(t, err, ErrNoDriver)
	require.NotErrorIs(t, err, ErrNotSupported)
	require.Contains(t, err.Error(), "cuInit")
	require.Equal(t, "", l.Path())
}

func TestSecondNameTried(t *testing.T) {
	f := newFake()
	f.openable = map[string]bool{"libcuda.so": true}
	l := newLib(f)
	require.NoError(t, l.Load())
	require.Equal(t, "libcuda.so", l.Path())
}

func TestPathOverride(t *testing.T) {
	f := newFake()
	f.openable["/opt/driver/libcuda.so.1"] = true
	l := newLib(f)
	t.Setenv(EnvPath, "/nonexistent/libcuda.so.1")
	require.NoError(t, l.configure([]Option{WithPath("/opt/driver/libcuda.so.1")}))
	require.NoError(t, l.Load())
	require.Equal(t, "/opt/driver/libcuda.so.1", l.Path())
	require.ErrorIs(t, l.configure([]Option{WithPath("x")}), errConfigured)
}

func TestEnvOverride(t *testing.T) {
	f := newFake()
	l := newLib(f)
	t.Setenv(EnvPath, "/nonexistent/libcuda.so.1")
	err := l.Load()
	require.ErrorIs(t, err, ErrNoDriver)
	require.Contains(t, err.Error(), "/nonexistent/libcuda.so.1")
}

func TestConcurrentFirstUseLoadsOnce(t *testing.T) {
	f := newFake()
	l := newLib(f)
	procs := []*Proc{
		l.NewProc(Symbol{Name: "cuInit", Version: 2000}),
		l.NewProc(Symbol{Name: "cuMemCreate", Version: 10020}),
	}
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := procs[i%2].Addr()
			require.NoError(t, err)
		}()
	}
	wg.Wait()
	require.Equal(t, int32(1), f.opens.Load())
	require.Len(t, l.Procs(), 2)
}

func TestOtherPlatformError(t *testing.T) {
	err := error(&LoadError{Platform: "darwin/arm64"})
	require.ErrorIs(t, err, ErrNoDriver)
	require.ErrorIs(t, err, ErrUnsupportedPlatform)
	require.Equal(t, "loader: no CUDA driver on this platform (darwin/arm64)", err.Error())
}
