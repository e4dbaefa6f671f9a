package cgo

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/vmm"
	"golang.org/x/sys/unix"
)

// BenchmarkConcurrency compares how the driver's VMM throughput scales with workers when
// they are C threads calling it directly, goroutines calling it through a minimal cgo
// binding, and goroutines calling cuvmm's vmm.CUDA() backend, in one process, the three
// interleaved at every worker count so that the driver's drift falls on all alike.
//
// Two workloads, each worker with its own reserved range of Chunks chunks of 2 MiB:
//
//   - own: every worker creates, maps, sets access to, unmaps and releases its own
//     chunks, Rounds times;
//   - shared: even workers map a set of shared allocations into their range, query their
//     properties, export them as file descriptors and unmap them, while odd workers run
//     the own workload (creating and releasing handles of their own meanwhile).
//
// Throughput is driver operations per second from the workers' common start to the last
// one's end. Besides the usual benchmark line it prints, per workload, worker count and way,
//
//	conc <workload> <workers> <way> median-ops/s <x> median-ratio <x> n <k>
//
// where the ratio is over the C threads of the same repetition. CONC_REPS sets the
// repetitions (default 5) and CONC_DEVICES spreads workers over that many devices (worker
// i on device i % n; default 1). CONC_CONTEXT=primary retains the primary context of
// every device used before the runs, as a process that also launches kernels or copies
// holds one: no worker makes it current, but with a context in the process the driver's
// VMM calls take a different course (on an H100, one C thread did 1.9x to 2.3x the
// operations per second, and 16 threads fewer than one; docs/benchmarks.md,
// "Concurrency"). Without it the process holds no context, as in a process that only
// allocates and maps. CONC_LOCK=1 locks each Go worker to its thread, as a C worker is (on
// an H100 it closed none of the gap to C). CONC_C_ON_GO=1 adds a fourth way, c-on-go: the
// C workers run on goroutines' threads, one cgo call each (on an H100 they matched the C
// threads, so the gap comes with crossing into C once per driver call). bench/run.sh runs
// both context modes and tabulates the result; a CPU profile (-test.cpuprofile) tells the
// Go ways apart by the label way=cgo or way=cuvmm (the C threads' samples carry no label).
func BenchmarkConcurrency(b *testing.B) {
	load(b)
	if err := CCLoad(); err != nil {
		b.Fatal(err)
	}
	be, err := vmm.CUDA()
	if err != nil {
		b.Fatal(err)
	}
	reps := envInt("CONC_REPS", 5)
	devices := envInt("CONC_DEVICES", 1)
	switch mode := os.Getenv("CONC_CONTEXT"); mode {
	case "":
	case "primary":
		for d := range devices {
			dev, err := cu.DeviceGet(d)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := dev.Primary(); err != nil {
				b.Fatal(err)
			}
		}
	default:
		b.Fatalf("CONC_CONTEXT=%q: want primary or nothing", mode)
	}
	const size, chunks, rounds, nshared = 2 << 20, 16, 20, 32
	chs, err := CShare(nshared, size)
	if err != nil {
		b.Fatal(err)
	}
	defer CUnshare(chs)
	vo := newVMMConc(be, devices)
	vhs := make([]cu.MemHandle, nshared)
	for i := range vhs {
		if vhs[i], err = be.Create(size, &vo.shareProp, 0); err != nil {
			b.Fatal(err)
		}
		defer be.Release(vhs[i])
	}
	for _, shared := range []bool{false, true} {
		name := map[bool]string{false: "own", true: "shared"}[shared]
		for _, n := range []int{1, 2, 4, 8, 16} {
			b.Run(fmt.Sprintf("%s/%d", name, n), func(b *testing.B) {
				w := Workload{Workers: n, Devices: devices, Shared: shared, Rounds: rounds, Chunks: chunks, Size: size}
				ways := []func() (time.Duration, int64, error){
					func() (time.Duration, int64, error) { return CRun(w, chs) },
					func() (time.Duration, int64, error) { return goConc[uint64](Conc{}, w, chs) },
					func() (time.Duration, int64, error) { return goConc[cu.MemHandle](vo, w, vhs) },
				}
				names := []string{"c", "cgo", "cuvmm"}
				if cOnGoroutines {
					ways = append(ways, func() (time.Duration, int64, error) { return CRunOnGoroutines(w, chs) })
					names = append(names, "c-on-go")
				}
				rate := make([][]float64, len(ways))
				cost := make([]processCost, len(ways))
				for b.Loop() {
					for r := range reps {
						for j := range ways {
							k := (r + j) % len(ways)
							before := sampleProcess()
							var d time.Duration
							var ops int64
							var err error
							// The label marks the way's goroutines (they inherit it) in a CPU
							// profile (-test.cpuprofile; go tool pprof -tagfocus way=cuvmm).
							pprof.Do(context.Background(), pprof.Labels("way", names[k]), func(context.Context) {
								d, ops, err = ways[k]()
							})
							if err != nil {
								b.Fatalf("%s: %v", names[k], err)
							}
							cost[k].add(before, sampleProcess(), d, ops)
							rate[k] = append(rate[k], float64(ops)/d.Seconds())
						}
					}
				}
				for k, way := range names {
					ratios := make([]float64, len(rate[k]))
					for i := range ratios {
						ratios[i] = rate[k][i] / rate[0][i]
					}
					fmt.Printf("conc %s %d %s median-ops/s %.0f median-ratio %.4f n %d\n", name, n, way, median(rate[k]), median(ratios), len(ratios))
					c := cost[k]
					perOp := func(v float64) float64 { return v / float64(c.ops) }
					// bench/run.sh reads the fields by position: add new ones at the end.
					fmt.Printf("conc-cost %s %d %s cpu-per-wall %.2f cpu-us-per-op %.2f mallocs-per-op %.3f gcs %d"+
						" sys-us-per-op %.2f vcsw-per-op %.3f ivcsw-per-op %.3f\n", name, n, way,
						c.cpu.Seconds()/c.wall.Seconds(), perOp(float64(c.cpu.Microseconds())), perOp(float64(c.mallocs)), c.gcs,
						perOp(float64(c.sys.Microseconds())), perOp(float64(c.vcsw)), perOp(float64(c.ivcsw)))
				}
			})
		}
	}
}

// processCost is what the process spent while workers ran: CPU time (user and system, all
// threads), heap allocations and garbage collections, against the wall time and the
// driver operations done.
type processCost struct {
	cpu, sys, wall time.Duration // sys: the part of cpu spent in the kernel
	ops            int64
	mallocs        uint64
	gcs            uint32
	vcsw, ivcsw    int64 // context switches: voluntary (a thread blocked) and involuntary
}

// processSample is the process's running totals at one moment, for processCost.add.
type processSample struct {
	cpu, sys    time.Duration
	mallocs     uint64
	gcs         uint32
	vcsw, ivcsw int64
}

func sampleProcess() processSample {
	var ru unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_SELF, &ru)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return processSample{
		cpu:     time.Duration(ru.Utime.Nano() + ru.Stime.Nano()),
		sys:     time.Duration(ru.Stime.Nano()),
		mallocs: ms.Mallocs,
		gcs:     ms.NumGC,
		vcsw:    ru.Nvcsw,
		ivcsw:   ru.Nivcsw,
	}
}

func (c *processCost) add(before, after processSample, wall time.Duration, ops int64) {
	c.cpu += after.cpu - before.cpu
	c.sys += after.sys - before.sys
	c.mallocs += after.mallocs - before.mallocs
	c.gcs += after.gcs - before.gcs
	c.vcsw += after.vcsw - before.vcsw
	c.ivcsw += after.ivcsw - before.ivcsw
	c.wall += wall
	c.ops += ops
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// lockThreads (CONC_LOCK=1) locks each Go worker to its thread.
var lockThreads = os.Getenv("CONC_LOCK") == "1"

// cOnGoroutines (CONC_C_ON_GO=1) adds the way c-on-go (CRunOnGoroutines).
var cOnGoroutines = os.Getenv("CONC_C_ON_GO") == "1"

// concOps is what goConc needs of a binding; H is its handle type.
type concOps[H any] interface {
	Reserve(size uint64) (uint64, error)
	Free(va, size uint64) error
	Create(size uint64, dev int) (H, error)
	Release(h H) error
	Map(va, size uint64, h H) error
	Unmap(va, size uint64) error
	SetAccess(va, size uint64, dev int) error
	Properties(h H) error
	ExportFD(h H) (int, error)
}

// goConc is cc_run with goroutines over o.
func goConc[H any](o concOps[H], w Workload, shared []H) (time.Duration, int64, error) {
	var ready, done sync.WaitGroup
	start := make(chan struct{})
	ops := make([]int64, w.Workers)
	errs := make([]error, w.Workers)
	for i := range w.Workers {
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			own := !w.Shared || i%2 == 1
			ops[i], errs[i] = goWork(o, w, shared, i, own, &ready, start)
		}()
	}
	ready.Wait()
	t0 := time.Now()
	close(start)
	done.Wait()
	d := time.Since(t0)
	var total int64
	for i := range ops {
		total += ops[i]
		if errs[i] != nil {
			return d, total, errs[i]
		}
	}
	return d, total, nil
}

func goWork[H any](o concOps[H], w Workload, shared []H, i int, own bool, ready *sync.WaitGroup, start chan struct{}) (ops int64, err error) {
	dev := i % w.Devices
	if lockThreads {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
	}
	va, err := o.Reserve(w.Size * uint64(w.Chunks))
	ready.Done()
	<-start
	if err != nil {
		return 0, err
	}
	defer func() {
		if ferr := o.Free(va, w.Size*uint64(w.Chunks)); err == nil {
			err = ferr
		}
	}()
	at := func(c int) uint64 { return va + uint64(c)*w.Size }
	hs := make([]H, w.Chunks)
	for range w.Rounds {
		if !own {
			for c := range w.Chunks {
				h := shared[(i+c)%len(shared)]
				if err := o.Map(at(c), w.Size, h); err != nil {
					return ops, err
				}
				if err := o.Properties(h); err != nil {
					return ops, err
				}
				fd, err := o.ExportFD(h)
				if err != nil {
					return ops, err
				}
				unix.Close(fd)
				if err := o.Unmap(at(c), w.Size); err != nil {
					return ops, err
				}
				ops += 4
			}
			continue
		}
		for c := range w.Chunks {
			if hs[c], err = o.Create(w.Size, dev); err != nil {
				return ops, err
			}
		}
		for c := range w.Chunks {
			if err := o.Map(at(c), w.Size, hs[c]); err != nil {
				return ops, err
			}
		}
		for c := range w.Chunks {
			if err := o.SetAccess(at(c), w.Size, dev); err != nil {
				return ops, err
			}
		}
		for c := range w.Chunks {
			if err := o.Unmap(at(c), w.Size); err != nil {
				return ops, err
			}
		}
		for c := range w.Chunks {
			if err := o.Release(hs[c]); err != nil {
				return ops, err
			}
		}
		ops += 5 * int64(w.Chunks)
	}
	return ops, nil
}

// vmmConc is the vmm backend as a concOps, with the properties and access descriptors of
// every device made once.
type vmmConc struct {
	be        vmm.Backend
	props     []cu.MemAllocationProp
	descs     [][]cu.MemAccessDesc
	shareProp cu.MemAllocationProp
}

func newVMMConc(be vmm.Backend, devices int) *vmmConc {
	o := &vmmConc{be: be}
	for d := range devices {
		o.props = append(o.props, vmm.DeviceProps(d).Driver())
		o.descs = append(o.descs, vmm.ReadWrite(d))
	}
	o.shareProp = vmm.Props{Location: vmm.OnDevice(0), HandleTypes: cu.MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR}.Driver()
	return o
}

func (o *vmmConc) Reserve(size uint64) (uint64, error) {
	va, err := o.be.Reserve(size, 0, 0, 0)
	return uint64(va), err
}
func (o *vmmConc) Free(va, size uint64) error { return o.be.Free(cu.DevicePtr(va), size) }
func (o *vmmConc) Create(size uint64, dev int) (cu.MemHandle, error) {
	return o.be.Create(size, &o.props[dev], 0)
}
func (o *vmmConc) Release(h cu.MemHandle) error { return o.be.Release(h) }
func (o *vmmConc) Map(va, size uint64, h cu.MemHandle) error {
	return o.be.Map(cu.DevicePtr(va), size, 0, h, 0)
}
func (o *vmmConc) Unmap(va, size uint64) error { return o.be.Unmap(cu.DevicePtr(va), size) }
func (o *vmmConc) SetAccess(va, size uint64, dev int) error {
	return o.be.SetAccess(cu.DevicePtr(va), size, o.descs[dev])
}
func (o *vmmConc) Properties(h cu.MemHandle) error {
	_, err := o.be.Properties(h)
	return err
}
func (o *vmmConc) ExportFD(h cu.MemHandle) (int, error) { return o.be.ExportFD(h) }
