package cu

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/cuvmm/cuvmm/loader"
	"github.com/ebitengine/purego"
	"github.com/stretchr/testify/require"
)

// These tests drive syscall6 and call against libc, so they need no GPU. They run on linux
// only (libc.so.6); elsewhere they skip. libc is opened through the loader (a separate
// Library, not the driver's), which keeps this file free of platform-only purego API so that
// it builds for every GOOS.

var libc struct {
	once  sync.Once
	lib   *loader.Library
	mu    sync.Mutex
	procs map[string]*loader.Proc
}

// libcProc resolves a libc function, skipping the test where there is no libc.so.6.
func libcProc(tb testing.TB, name string) *loader.Proc {
	tb.Helper()
	if runtime.GOOS != "linux" || unsafe.Sizeof(uintptr(0)) != 8 {
		tb.Skip("libc.so.6 tests run on 64-bit linux only")
	}
	libc.once.Do(func() {
		libc.lib = loader.New(loader.WithPath("libc.so.6"))
		libc.procs = map[string]*loader.Proc{}
	})
	if err := libc.lib.Load(); err != nil {
		tb.Skipf("no libc.so.6: %v", err)
	}
	libc.mu.Lock()
	p, ok := libc.procs[name]
	if !ok {
		p = libc.lib.NewProc(loader.Symbol{Name: name})
		libc.procs[name] = p
	}
	libc.mu.Unlock()
	if _, err := p.Addr(); err != nil {
		tb.Fatalf("libc %s: %v", name, err)
	}
	return p
}

// bit40 is a value with bits above the low 32, kept out of constants so that the file
// still compiles for 32-bit targets (where these tests skip).
var bit40 uint64 = 1 << 40

func libcAddr(tb testing.TB, name string) uintptr {
	tb.Helper()
	addr, _ := libcProc(tb, name).Addr()
	return addr
}

// scratch is heap memory for pointer arguments, pooled like cu's out: per the memory rule
// of syscall.go, what syscall6 points to must be on the heap and kept alive by the caller.
type scratch struct {
	b [8192]byte // big enough for a ucontext_t on arm64 (about 4.5 KiB)
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

func (s *scratch) addr(off int) uintptr { return uintptr(unsafe.Pointer(&s.b[off])) }

// ptrAt turns a C address back into a pointer without a uintptr-to-Pointer conversion that
// vet would flag; the memory is C's (mmap), not Go's.
func ptrAt(addr uintptr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&addr)) }

func TestSyscallLibc(t *testing.T) {
	labs := libcAddr(t, "labs")
	memset := libcAddr(t, "memset")
	strtoul := libcAddr(t, "strtoul")

	s := scratchPool.Get().(*scratch)
	defer scratchPool.Put(s)

	t.Run("64-bit argument and result", func(t *testing.T) {
		for _, x := range []int64{0, 1, -1, 0x7fffffff, 0x123456789a, -0x123456789abcdef, 1 << 62} {
			want := x
			if want < 0 {
				want = -want
			}
			require.Equal(t, uint64(want), uint64(syscall6(labs, uintptr(x), 0, 0, 0, 0, 0)), "labs(%d)", x)
		}
	})

	t.Run("pointer argument and pointer result", func(t *testing.T) {
		for i := range s.b[:64] {
			s.b[i] = 0xee
		}
		p := s.addr(8)
		r := syscall6(memset, p, 0x5a, 32, 0, 0, 0)
		require.Equal(t, p, r, "memset returns its destination")
		for i, c := range s.b[:64] {
			want := byte(0xee)
			if i >= 8 && i < 40 {
				want = 0x5a
			}
			require.Equal(t, want, c, "byte %d", i)
		}
	})

	t.Run("pointer out-parameter", func(t *testing.T) {
		const digits = "fedcba9876543210"
		copy(s.b[:], digits+"xyz\x00")
		end := s.addr(1024) // 8-aligned: s.b starts an 8 KiB heap object
		*(*uintptr)(unsafe.Pointer(&s.b[1024])) = 0
		r := syscall6(strtoul, s.addr(0), end, 16, 0, 0, 0)
		require.Equal(t, uint64(0xfedcba9876543210), uint64(r))
		require.Equal(t, s.addr(len(digits)), *(*uintptr)(unsafe.Pointer(&s.b[1024])), "endptr")
	})

	t.Run("six arguments", func(t *testing.T) {
		mmap := libcAddr(t, "mmap")
		munmap := libcAddr(t, "munmap")
		// mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 8192) of a file whose pages are
		// numbered: every argument shows in the result (the wrong fd, offset, protection or
		// flags give other bytes, a fault or MAP_FAILED).
		const page = 4096
		path := filepath.Join(t.TempDir(), "pages")
		data := make([]byte, 4*page)
		for i := range data {
			data[i] = byte(i/page*16 + i%7)
		}
		require.NoError(t, os.WriteFile(path, data, 0o600))
		f, err := os.Open(path)
		require.NoError(t, err)
		defer f.Close()
		const protRead, mapShared = 1, 1 // the same on linux/amd64 and linux/arm64
		addr := syscall6(mmap, 0, page, protRead, mapShared, f.Fd(), 2*page)
		require.NotEqual(t, ^uintptr(0), addr, "mmap failed")
		require.NotZero(t, addr)
		got := unsafe.Slice((*byte)(ptrAt(addr)), page)
		require.Equal(t, data[2*page:3*page], got)
		require.Zero(t, syscall6(munmap, addr, page, 0, 0, 0, 0))
		runtime.KeepAlive(f)
	})

	t.Run("stack aligned at the call", func(t *testing.T) {
		// glibc's getcontext stores the stack pointer its caller had at the call: the
		// trampoline's, which the C ABI wants 16-byte aligned.
		var off int
		switch runtime.GOARCH {
		case "amd64":
			off = 160 // uc_mcontext.gregs[REG_RSP]
		case "arm64":
			off = 432 // uc_mcontext.sp
		default:
			t.Skip("no ucontext layout for " + runtime.GOARCH)
		}
		getcontext := libcAddr(t, "getcontext")
		clear(s.b[:])
		require.Zero(t, syscall6(getcontext, s.addr(0), 0, 0, 0, 0, 0))
		sp := *(*uint64)(unsafe.Pointer(&s.b[off]))
		require.NotZero(t, sp)
		require.Zero(t, sp%16, "stack pointer %#x at the C call", sp)
	})
	runtime.KeepAlive(s)
}

func TestCallLibc(t *testing.T) {
	abs := libcProc(t, "abs")
	clockGettime := libcProc(t, "clock_gettime")
	memcmp := libcProc(t, "memcmp")

	t.Run("non-zero result is a Result", func(t *testing.T) {
		require.NoError(t, call(abs, 0))
		err := call(abs, uintptr(0xffffffff)) // abs(-1)
		var r Result
		require.ErrorAs(t, err, &r)
		require.Equal(t, Result(1), r)
		// Only the low 32 bits of the result register count (CUresult is an int32).
		require.NoError(t, call(libcProc(t, "labs"), uintptr(bit40)))
	})

	t.Run("out-parameter in a frame", func(t *testing.T) {
		var f frame
		f.a[0] = 0 // CLOCK_REALTIME
		f.ref(1, 0)
		before := time.Now().Unix()
		require.NoError(t, f.call(clockGettime))
		after := time.Now().Unix()
		require.GreaterOrEqual(t, int64(f.scratch[0]), before)
		require.LessOrEqual(t, int64(f.scratch[0]), after)
		require.Less(t, f.scratch[1], uint64(1e9), "tv_nsec")
	})

	t.Run("callKeep on user memory", func(t *testing.T) {
		a := []byte("same bytes")
		b := []byte("same bytes")
		require.NoError(t, callKeep(memcmp, uintptr(unsafe.Pointer(&a[0])), uintptr(unsafe.Pointer(&b[0])), uintptr(len(a))))
		b[3] = 'X'
		require.Error(t, callKeep(memcmp, uintptr(unsafe.Pointer(&a[0])), uintptr(unsafe.Pointer(&b[0])), uintptr(len(a))))
	})

	t.Run("missing symbol", func(t *testing.T) {
		p := libc.lib.NewProc(loader.Symbol{Name: "cuvmm_no_such_function"})
		err := call(p)
		require.ErrorIs(t, err, ERROR_NOT_SUPPORTED)
		require.ErrorIs(t, err, loader.ErrNotSupported)
	})

	t.Run("too many arguments", func(t *testing.T) {
		require.Panics(t, func() { _ = call(abs, 1, 2, 3, 4, 5, 6, 7) })
	})
}

func TestSyscallNoAllocs(t *testing.T) {
	if !fastPath {
		t.Skip("purego.SyscallN allocates")
	}
	labs := libcAddr(t, "labs")
	clockGettime := libcProc(t, "clock_gettime")
	x := uintptr(bit40)
	require.Zero(t, testing.AllocsPerRun(1000, func() {
		if syscall6(labs, x, 0, 0, 0, 0, 0) != x {
			panic("labs")
		}
	}), "syscall6")

	// A heap out-parameter the caller keeps alive, through call.
	ts := new([2]uint64)
	require.Zero(t, testing.AllocsPerRun(1000, func() {
		if call(clockGettime, 1, uintptr(unsafe.Pointer(&ts[0]))) != nil {
			panic("clock_gettime")
		}
	}), "call with a heap out-parameter")

	// The shape of DriverVersion: the out-parameter in a frame on the stack.
	require.Zero(t, testing.AllocsPerRun(1000, func() {
		var f frame
		f.a[0] = 1
		f.ref(1, 0)
		if f.call(clockGettime) != nil {
			panic("clock_gettime")
		}
	}), "frame call")
}

// recurse calls f n frames deep, each frame holding 256 bytes that it checks on the way
// back, so that goroutine stacks grow (and are copied) before the calls and any write to a
// stale stack address shows.
//
//go:noinline
func recurse(n int, f func() error) error {
	var pad [32]uint64
	for i := range pad {
		pad[i] = uint64(n)*0x9e3779b97f4a7c15 + uint64(i)
	}
	var err error
	if n == 0 {
		err = f()
	} else {
		err = recurse(n-1, f)
	}
	for i := range pad {
		if pad[i] != uint64(n)*0x9e3779b97f4a7c15+uint64(i) {
			return fmt.Errorf("frame %d: stack word %d corrupted", n, i)
		}
	}
	return err
}

// TestSyscallStress calls libc from many goroutines at once while the GC runs without pause
// (scanning stacks, shrinking them) and each call sits at the bottom of a deep recursion
// that grew its stack, and checks every result.
func TestSyscallStress(t *testing.T) {
	memset := libcAddr(t, "memset")
	labs := libcAddr(t, "labs")
	strtoul := libcAddr(t, "strtoul")

	workers := 4 * runtime.GOMAXPROCS(0)
	if workers < 16 {
		workers = 16
	}
	iters := 1500
	if testing.Short() {
		iters = 150
	}
	// Besides the explicit runtime.GC loop, a tiny GOGC makes the workers' own small
	// allocations start cycles all the time.
	defer debug.SetGCPercent(debug.SetGCPercent(1))
	var before runtime.MemStats
	runtime.ReadMemStats(&before)

	once := func(w, i int) error {
		s := scratchPool.Get().(*scratch)
		defer scratchPool.Put(s)

		v := byte(w*31 + i + 1)
		p := s.addr(0)
		if r := syscall6(memset, p, uintptr(v), 4096, 0, 0, 0); r != p {
			return fmt.Errorf("memset returned %#x, want %#x", r, p)
		}
		for j, c := range s.b[:4096] {
			if c != v {
				return fmt.Errorf("memset: byte %d is %#x, want %#x", j, c, v)
			}
		}

		x := int64(w)<<40 | int64(i)<<8 | 1
		if r := syscall6(labs, uintptr(-x), 0, 0, 0, 0, 0); int64(r) != x {
			return fmt.Errorf("labs(%d) = %d", -x, int64(r))
		}

		u := uint64(x) ^ 0xdead000000000000
		str := strconv.FormatUint(u, 16)
		copy(s.b[:], str+"\x00")
		*(*uintptr)(unsafe.Pointer(&s.b[4096])) = 0
		if r := syscall6(strtoul, s.addr(0), s.addr(4096), 16, 0, 0, 0); uint64(r) != u {
			return fmt.Errorf("strtoul(%q) = %#x", str, uint64(r))
		}
		if end := *(*uintptr)(unsafe.Pointer(&s.b[4096])); end != s.addr(len(str)) {
			return fmt.Errorf("strtoul endptr %#x, want %#x", end, s.addr(len(str)))
		}
		runtime.KeepAlive(s)
		return nil
	}

	stress(t, workers, iters, func(w, i int) int { return (w*7919 + i*104729) % 400 }, once)
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	t.Logf("%d goroutines x %d calls of 3 functions, %d GC cycles meanwhile", workers, iters, after.NumGC-before.NumGC)
}

// Benchmarks for the lead's ratio: the same libc function through the fast path and
// through purego.SyscallN.

func BenchmarkSyscallFast(b *testing.B) {
	fn := libcAddr(b, "labs")
	b.ReportAllocs()
	var sum uintptr
	for i := 0; b.Loop(); i++ {
		sum += syscall6(fn, uintptr(i), 0, 0, 0, 0, 0)
	}
	runtime.KeepAlive(sum)
}

func BenchmarkPuregoSyscallN(b *testing.B) {
	fn := libcAddr(b, "labs")
	b.ReportAllocs()
	var sum uintptr
	for i := 0; b.Loop(); i++ {
		r, _, _ := purego.SyscallN(fn, uintptr(i))
		sum += r
	}
	runtime.KeepAlive(sum)
}

// The shape of DriverVersion (an out-parameter, one pointer argument, result checked)
// through a frame, and through the first version of call, which was purego.SyscallN under
// //go:uintptrescapes with pooled heap scratch.

func BenchmarkCallOutParam(b *testing.B) {
	p := libcProc(b, "clock_gettime")
	b.ReportAllocs()
	for b.Loop() {
		var f frame
		f.a[0] = 1
		f.ref(1, 0)
		if err := f.call(p); err != nil {
			b.Fatal(err)
		}
	}
}

var puregoScratch = sync.Pool{New: func() any { return new([2]uint64) }}

func BenchmarkPuregoCallOutParam(b *testing.B) {
	p := libcProc(b, "clock_gettime")
	b.ReportAllocs()
	for b.Loop() {
		o := puregoScratch.Get().(*[2]uint64)
		if err := puregoCall(p, 1, uintptr(unsafe.Pointer(&o[0]))); err != nil {
			b.Fatal(err)
		}
		puregoScratch.Put(o)
	}
}

// puregoCall is call as it was before the fast path.
//
//go:uintptrescapes
func puregoCall(p *loader.Proc, args ...uintptr) error {
	addr, err := p.Addr()
	if err != nil {
		return symbolErr(err)
	}
	r, _, _ := purego.SyscallN(addr, args...)
	if uint32(r) != 0 {
		return Result(int32(uint32(r)))
	}
	return nil
}

// stress runs once(w, i) for iters iterations in each of workers goroutines, each call at
// the bottom of a recursion depth(w, i) frames deep (so that stacks grow and are copied
// around the calls), while another goroutine runs the GC without pause (scanning and
// shrinking stacks). It reports every error.
func stress(t *testing.T, workers, iters int, depth func(w, i int) int, once func(w, i int) error) {
	t.Helper()
	stop := make(chan struct{})
	gcDone := make(chan struct{})
	go func() {
		defer close(gcDone)
		for {
			select {
			case <-stop:
				return
			default:
				runtime.GC()
			}
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range iters {
				d := depth(w, i)
				if err := recurse(d, func() error { return once(w, i) }); err != nil {
					errs <- fmt.Errorf("worker %d, iteration %d, depth %d: %w", w, i, d, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	<-gcDone
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
