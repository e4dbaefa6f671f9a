package main

import (
	"errors"
	"fmt"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/internal/backend"
	"github.com/cuvmm/cuvmm/sim"
	"github.com/cuvmm/cuvmm/vmm"
)

// device is the GPU the strategies grow their buffers on: a vmm.Backend (the real driver or
// the simulator) that counts the driver calls made through it, and, on the real driver, the
// device's primary context for cuMemAlloc, the copies, cuCtxSynchronize and cuMemGetInfo.
type device struct {
	be      *countingBackend
	ordinal int
	ctx     *cu.Context // nil on sim: it has no contexts, so no cuMemAlloc
	sim     *sim.Sim    // nil on the real driver
	simMem  uint64      // the simulated device's memory (its cuMemCreate capacity)

	desc   string // for the summary: backend, device name, memory, driver
	prop   cu.MemAllocationProp
	access []cu.MemAccessDesc
	gran   uint64
}

// simOptions configure the simulated machine of --backend=sim.
type simOptions struct {
	preset      string
	mem         uint64 // 0: the preset's
	refuseHints bool
}

func openDevice(kind string, ordinal int, so simOptions) (*device, error) {
	if ordinal < 0 {
		return nil, usageError{fmt.Errorf("-device %d: must be 0 or more", ordinal)}
	}
	// parseFlags has checked the flags and filled in the default preset, which only the
	// simulator takes.
	choice := backend.Choice{Kind: kind}
	if kind != backend.CUDA {
		choice.Preset = so.preset
	}
	if err := choice.Check(); err != nil {
		return nil, usageError{err}
	}
	// The device ordinal and the simulated memory are checked against the preset before
	// the simulator is built.
	tune := func(cfg *sim.Config) error {
		if ordinal >= len(cfg.Devices) {
			return usageError{fmt.Errorf("-device %d: preset %s has %d device(s)", ordinal, cfg.Name, len(cfg.Devices))}
		}
		if so.mem != 0 {
			cfg.Devices[ordinal].TotalMem = so.mem
		}
		cfg.RefuseHints = so.refuseHints
		return nil
	}
	op, err := backend.Opener{Tune: tune}.Open(choice, backend.FallbackUnusable)
	var ue usageError
	switch {
	case errors.As(err, &ue):
		return nil, err
	case err != nil:
		return nil, fmt.Errorf("%s backend: %w", choice.Kind, err)
	}
	d := &device{ordinal: ordinal}
	be := op.Backend
	if op.Sim != nil {
		d.sim, d.simMem = op.Sim, op.Config.Devices[ordinal].TotalMem
	} else {
		cd, err := cu.DeviceGet(ordinal)
		if err != nil {
			return nil, fmt.Errorf("device %d: %w", ordinal, err)
		}
		if d.ctx, err = cd.Primary(); err != nil {
			return nil, fmt.Errorf("device %d: primary context: %w", ordinal, err)
		}
	}
	d.be = &countingBackend{Backend: be}

	info, err := be.Device(ordinal)
	if err != nil {
		return nil, fmt.Errorf("device %d: %w", ordinal, err)
	}
	ver, err := be.DriverVersion()
	if err != nil {
		return nil, fmt.Errorf("driver version: %w", err)
	}
	d.desc = fmt.Sprintf("backend %s, device %d: %s, %s, driver API %d.%d",
		be.Name(), ordinal, info.Name, gib(info.TotalMem), ver/1000, ver%1000/10)
	if op.FellBack != nil {
		d.desc += fmt.Sprintf(" (--backend=auto: no usable CUDA driver, so sim preset %s)", op.Config.Name)
	}
	if so.refuseHints && d.sim != nil {
		d.desc += ", hints refused"
	}
	d.prop = vmm.DeviceProps(ordinal).Driver()
	d.access = vmm.ReadWrite(ordinal)
	if d.gran, err = be.Granularity(&d.prop, cu.MEM_ALLOC_GRANULARITY_MINIMUM); err != nil {
		return nil, fmt.Errorf("device %d: allocation granularity: %w", ordinal, err)
	}
	if d.gran == 0 {
		return nil, fmt.Errorf("device %d: the driver reports an allocation granularity of 0", ordinal)
	}
	return d, nil
}

// usageError marks an error in the command line, as opposed to one of the driver.
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

// errNoContext is the reason the cuMemAlloc strategies do not run on sim.
var errNoContext = errors.New("skipped: cuMemAlloc, cuMemcpyDtoD and cuMemsetD8 need a CUDA context, which the sim backend does not have")

// memInfo is cuMemGetInfo: free and total device memory. On sim, total is the simulated
// capacity and free what cuMemCreate has not taken.
func (d *device) memInfo() (free, total uint64, err error) {
	if d.ctx != nil {
		return d.ctx.MemGetInfo()
	}
	st := d.sim.Stats()
	used := st.Committed[d.ordinal]
	return d.simMem - min(used, d.simMem), d.simMem, nil
}

// used is the device memory in use: total minus free.
func (d *device) used() (uint64, error) {
	free, total, err := d.memInfo()
	if err != nil {
		return 0, err
	}
	return total - min(free, total), nil
}

// The context calls, counted. cu makes the context current (cuCtxSetCurrent) on a locked
// thread for each, and ends each copy and memset with a cuCtxSynchronize of its own; those
// are not counted: the counts are the calls grow.c makes.

func (d *device) sync() error {
	if d.ctx == nil {
		return nil // sim: every call has completed when it returns
	}
	d.be.calls++
	return d.ctx.Synchronize()
}

func (d *device) memAlloc(size uint64) (cu.DevicePtr, error) {
	d.be.calls++
	return d.ctx.MemAlloc(size)
}

func (d *device) memFree(p cu.DevicePtr) error {
	d.be.calls++
	return d.ctx.MemFree(p)
}

func (d *device) copyDtoD(dst, src cu.DevicePtr, size uint64) error {
	d.be.calls++
	return d.ctx.CopyDtoD(dst, src, size)
}

func (d *device) memsetD8(dst cu.DevicePtr, v uint8, n uint64) error {
	d.be.calls++
	return d.ctx.MemsetD8(dst, v, n)
}

// countingBackend counts the VMM driver calls made through it, by the growable buffer and by
// the Go ports of grow.c alike. The strategies run one at a time on one goroutine.
type countingBackend struct {
	vmm.Backend
	calls int
}

func (c *countingBackend) Granularity(prop *cu.MemAllocationProp, option cu.MemAllocationGranularityFlags) (uint64, error) {
	c.calls++
	return c.Backend.Granularity(prop, option)
}

func (c *countingBackend) Create(size uint64, prop *cu.MemAllocationProp, flags uint64) (cu.MemHandle, error) {
	c.calls++
	return c.Backend.Create(size, prop, flags)
}

func (c *countingBackend) Release(h cu.MemHandle) error {
	c.calls++
	return c.Backend.Release(h)
}

func (c *countingBackend) Reserve(size, alignment uint64, hint cu.DevicePtr, flags uint64) (cu.DevicePtr, error) {
	c.calls++
	return c.Backend.Reserve(size, alignment, hint, flags)
}

func (c *countingBackend) Free(ptr cu.DevicePtr, size uint64) error {
	c.calls++
	return c.Backend.Free(ptr, size)
}

func (c *countingBackend) Map(ptr cu.DevicePtr, size, offset uint64, h cu.MemHandle, flags uint64) error {
	c.calls++
	return c.Backend.Map(ptr, size, offset, h, flags)
}

func (c *countingBackend) Unmap(ptr cu.DevicePtr, size uint64) error {
	c.calls++
	return c.Backend.Unmap(ptr, size)
}

func (c *countingBackend) SetAccess(ptr cu.DevicePtr, size uint64, desc []cu.MemAccessDesc) error {
	c.calls++
	return c.Backend.SetAccess(ptr, size, desc)
}

// warmUp makes one of each driver call the strategies make, outside any measurement, so
// that the first strategy does not pay the driver's first-use costs for all of them. (grow.c
// does no warm-up: its first strategy, vmm_reserved, pays them.)
func (d *device) warmUp() error {
	calls := d.be.calls
	defer func() { d.be.calls = calls }()
	be := d.be
	va, err := be.Reserve(d.gran, 0, 0, 0)
	if err != nil {
		return fmt.Errorf("cuMemAddressReserve: %w", err)
	}
	h, err := be.Create(d.gran, &d.prop, 0)
	if err != nil {
		return errors.Join(fmt.Errorf("cuMemCreate: %w", err), be.Free(va, d.gran))
	}
	var errs []error
	if err := be.Map(va, d.gran, 0, h, 0); err != nil {
		errs = append(errs, fmt.Errorf("cuMemMap: %w", err))
	} else {
		if err := be.SetAccess(va, d.gran, d.access); err != nil {
			errs = append(errs, fmt.Errorf("cuMemSetAccess: %w", err))
		}
		if err := be.Unmap(va, d.gran); err != nil {
			errs = append(errs, fmt.Errorf("cuMemUnmap: %w", err))
		}
	}
	if err := be.Release(h); err != nil {
		errs = append(errs, fmt.Errorf("cuMemRelease: %w", err))
	}
	if err := be.Free(va, d.gran); err != nil {
		errs = append(errs, fmt.Errorf("cuMemAddressFree: %w", err))
	}
	if d.ctx != nil {
		a, err := d.memAlloc(2 * d.gran)
		if err != nil {
			return errors.Join(append(errs, fmt.Errorf("cuMemAlloc: %w", err))...)
		}
		if err := d.memsetD8(a, 1, d.gran); err != nil {
			errs = append(errs, fmt.Errorf("cuMemsetD8: %w", err))
		}
		if err := d.copyDtoD(a+cu.DevicePtr(d.gran), a, d.gran); err != nil {
			errs = append(errs, fmt.Errorf("cuMemcpyDtoD: %w", err))
		}
		if err := d.memFree(a); err != nil {
			errs = append(errs, fmt.Errorf("cuMemFree: %w", err))
		}
		if err := d.sync(); err != nil {
			errs = append(errs, fmt.Errorf("cuCtxSynchronize: %w", err))
		}
		if _, _, err := d.memInfo(); err != nil {
			errs = append(errs, fmt.Errorf("cuMemGetInfo: %w", err))
		}
	}
	return errors.Join(errs...)
}
