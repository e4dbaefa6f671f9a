package loader

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fakeClock is the Library's clock in these tests: time moves only when a test says so.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *fakeClock { return &fakeClock{t: time.Unix(1_700_000_000, 0)} }

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// absentDriver is a fake with no driver installed yet, and a library on it with a fake clock.
func absentDriver() (*fakeSource, *fakeClock, *Library) {
	f := newFake()
	f.openable = map[string]bool{}
	clk := newClock()
	l := newLib(f)
	l.now = clk.now
	return f, clk, l
}

// The node agent case: the process starts before the driver container has installed the
// driver, and picks the driver up on a later use without a restart.
func TestLoadRetriesAfterBackoff(t *testing.T) {
	f, clk, l := absentDriver()
	p := l.NewProc(Symbol{Name: "cuMemCreate", Version: 10020})
	missing := l.NewProc(Symbol{Name: "cuNoSuchCall", Version: 12000})

	require.ErrorIs(t, l.Load(), ErrNoDriver)
	_, err := p.Addr()
	require.ErrorIs(t, err, ErrNoDriver)
	require.Equal(t, "", l.Path())
	require.Equal(t, int32(1), f.opens.Load(), "uses within the backoff reuse the failure")

	f.setOpenable("libcuda.so.1", true) // the driver arrives
	clk.add(retryMin - time.Millisecond)
	require.ErrorIs(t, l.Load(), ErrNoDriver)
	require.Equal(t, int32(1), f.opens.Load())

	clk.add(time.Millisecond)
	addr, err := p.Addr()
	require.NoError(t, err, "a proc that failed only for want of a driver resolves after the late load")
	require.Equal(t, uintptr(0x1200), addr)
	require.Equal(t, int32(2), f.opens.Load())
	require.Equal(t, "libcuda.so.1", l.Path())
	require.True(t, l.UsesGetProcAddress())
	_, err = missing.Addr()
	require.ErrorIs(t, err, ErrNotSupported, "a symbol the loaded driver lacks is missing for good")

	// A successful load is final: nothing is opened again, whatever happens to the file.
	f.setOpenable("libcuda.so.1", false)
	clk.add(time.Hour)
	require.NoError(t, l.Load())
	require.NoError(t, l.Retry())
	require.Equal(t, int32(2), f.opens.Load())
	require.ErrorIs(t, l.configure([]Option{WithPath("/other/libcuda.so.1")}), errConfigured)
}

func TestBackoffDoublesUpToMax(t *testing.T) {
	f, clk, l := absentDriver()
	require.Error(t, l.Load())
	opens := f.opens.Load()
	for _, want := range []time.Duration{1, 2, 4, 8, 16, 30, 30, 30} {
		want *= time.Second
		clk.add(want - time.Millisecond)
		require.Error(t, l.Load())
		require.Equal(t, opens, f.opens.Load(), "attempt before the %v backoff passed", want)
		clk.add(time.Millisecond)
		require.Error(t, l.Load())
		opens++
		require.Equal(t, opens, f.opens.Load(), "no attempt once the %v backoff passed", want)
	}
}

// Many goroutines using an absent driver at once make one dlopen attempt per backoff
// interval, not one each.
func TestConcurrentUsersOneAttemptPerInterval(t *testing.T) {
	f, clk, l := absentDriver()
	procs := []*Proc{
		l.NewProc(Symbol{Name: "cuInit", Version: 2000}),
		l.NewProc(Symbol{Name: "cuMemCreate", Version: 10020}),
	}
	wave := func(wantErr bool) {
		t.Helper()
		var wg sync.WaitGroup
		errs := make(chan error, 64*20)
		for i := range 64 {
			wg.Go(func() {
				for j := range 20 {
					var err error
					switch (i + j) % 4 {
					case 0:
						err = l.Load()
					case 1:
						err = l.Retry()
					default:
						_, err = procs[j%2].Addr()
					}
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if wantErr {
				require.ErrorIs(t, err, ErrNoDriver)
			} else {
				require.NoError(t, err)
			}
		}
	}
	wave(true)
	require.Equal(t, int32(1), f.opens.Load())
	wave(true)
	require.Equal(t, int32(1), f.opens.Load(), "same instant: no new attempt")
	clk.add(retryMin)
	wave(true)
	require.Equal(t, int32(2), f.opens.Load())

	f.setOpenable("libcuda.so", true)
	clk.add(2 * retryMin)
	wave(false)
	require.Equal(t, int32(3), f.opens.Load())
	require.Equal(t, "libcuda.so", l.Path())
}

func TestRetryDoesNotWaitForBackoff(t *testing.T) {
	f, clk, l := absentDriver()
	require.Error(t, l.Load())
	require.Error(t, l.Retry())
	require.Equal(t, int32(1), f.opens.Load(), "no attempt within a second of the last")

	clk.add(retryMin)
	require.Error(t, l.Retry())
	require.Equal(t, int32(2), f.opens.Load())
	clk.add(retryMin) // the automatic backoff is now 2s: Load waits, Retry does not
	require.Error(t, l.Load())
	require.Equal(t, int32(2), f.opens.Load())
	f.setOpenable("libcuda.so.1", true)
	require.NoError(t, l.Retry())
	require.Equal(t, int32(3), f.opens.Load())
	require.Equal(t, "libcuda.so.1", l.Path())
}

// After a failed load the library may be reconfigured, and the next attempt uses the new
// path.
func TestConfigureAfterFailedLoad(t *testing.T) {
	f, clk, l := absentDriver()
	require.Error(t, l.Load())
	f.setOpenable("/run/nvidia/driver/lib/libcuda.so.1", true)
	require.NoError(t, l.configure([]Option{WithPath("/run/nvidia/driver/lib/libcuda.so.1")}))
	clk.add(retryMin)
	require.NoError(t, l.Retry())
	require.Equal(t, "/run/nvidia/driver/lib/libcuda.so.1", l.Path())
}

// A zero Library has no library to load: its loads fail at once, every time, and leave
// nothing half done (a Retry after them returns too).
func TestZeroLibrary(t *testing.T) {
	var l Library
	for range 2 {
		if err := l.Load(); err == nil || !strings.Contains(err.Error(), "zero Library") {
			t.Fatalf("Load = %v, want the zero Library's error", err)
		}
		if err := l.Retry(); err == nil {
			t.Fatal("Retry succeeded")
		}
	}
	if p := l.Path(); p != "" {
		t.Fatalf("Path = %q", p)
	}
	if _, err := l.NewProc(Symbol{Name: "cuInit", Version: 2000}).Addr(); err == nil {
		t.Fatal("a zero Library's Proc resolved")
	}
}

// A zero Proc belongs to no library: it fails to resolve, saying so.
func TestZeroProc(t *testing.T) {
	var p Proc
	_, err := p.Addr()
	var se *SymbolError
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "zero Proc") || p.Find() == nil {
		t.Fatalf("Addr = %v, want a *SymbolError for the zero Proc", err)
	}
}
