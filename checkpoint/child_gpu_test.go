//go:build gpu && linux

package checkpoint_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/internal/kernels"
	"github.com/cuvmm/cuvmm/internal/reexec"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/cuvmm/cuvmm/vmm/sleep"
)

const chunk = 64 << 20

// span is memory a child holds on device 0: its 64 MiB chunk i filled with first+i, or
// zero after a discard.
type span struct {
	base  cu.DevicePtr
	size  uint64
	first byte
	zero  bool
}

func (s span) fill(m *vmm.Manager) error {
	for off := uint64(0); off < s.size; off += chunk {
		if err := m.Fill(0, s.base+cu.DevicePtr(off), s.first+byte(off/chunk), min(chunk, s.size-off)); err != nil {
			return err
		}
	}
	return nil
}

func (s span) check(m *vmm.Manager) error {
	buf := make([]byte, chunk)
	for off := uint64(0); off < s.size; off += chunk {
		b := buf[:min(chunk, s.size-off)]
		if err := m.ReadAt(0, b, s.base+cu.DevicePtr(off)); err != nil {
			return err
		}
		want := s.first + byte(off/chunk)
		if s.zero {
			want = 0
		}
		for i, v := range b {
			if v != want {
				return fmt.Errorf("byte %d of the chunk at +%d is %#x, not %#x", i, off, v, want)
			}
		}
	}
	return nil
}

// mapped reserves size bytes and maps a there with read-write access from device 0.
func mapped(m *vmm.Manager, a *vmm.Allocation, size uint64) (cu.DevicePtr, error) {
	r, err := m.Reserve(size)
	if err != nil {
		return 0, err
	}
	mp, err := r.Map(0, a)
	if err != nil {
		return 0, err
	}
	return r.Base(), mp.SetAccess(vmm.ReadWrite(0)...)
}

// child holds what spec says on device 0, says "ready" (and, for export, the importer's
// pid), then answers one line for each command line on stdin, until "quit":
//
//	vmm:G      one reservation of G GiB in 64 MiB chunks
//	sleep:W:K  a sleep.Pool with tags "weights" (W GiB) and "kv" (K GiB)
//	export:G   one allocation of G GiB, exported as a POSIX descriptor (kept open) to a
//	           grandchild that maps it (import:G)
//
// Commands: spin MS (a kernel running MS milliseconds, waited for), check (every byte: "ok" or what differs; the importer's too), uuid (device
// 0's), discard and wake (the kv tag), poke N (writes N at the first byte, asks the
// importer to peek: "shared" or "split ..."), peek (the first byte).
func child(spec string) error {
	b, err := vmm.CUDA()
	if err != nil {
		return err
	}
	m := vmm.New(b)
	kind, arg, _ := strings.Cut(spec, ":")
	var spans []span
	var pool *sleep.Pool
	var peer *bufio.Reader
	var peerIn io.Writer
	ready := "ready"
	gib := func(s string) (uint64, error) { n, err := strconv.Atoi(s); return uint64(n) << 30, err }
	switch kind {
	case "vmm":
		size, err := gib(arg)
		if err != nil {
			return err
		}
		r, err := m.Reserve(size)
		if err != nil {
			return err
		}
		for off := uint64(0); off < size; off += chunk {
			a, err := m.Create(chunk, vmm.DeviceProps(0))
			if err != nil {
				return err
			}
			mp, err := r.Map(off, a)
			if err != nil {
				return err
			}
			if err := mp.SetAccess(vmm.ReadWrite(0)...); err != nil {
				return err
			}
		}
		spans = append(spans, span{base: r.Base(), size: size, first: 1})
	case "sleep":
		w, k, _ := strings.Cut(arg, ":")
		pool = sleep.New(m, sleep.Options{})
		for i, t := range []struct{ tag, gibs string }{{"weights", w}, {"kv", k}} {
			size, err := gib(t.gibs)
			if err != nil {
				return err
			}
			r, err := pool.Alloc(t.tag, size, 0)
			if err != nil {
				return err
			}
			spans = append(spans, span{base: r.Base(), size: size, first: byte(1 + 100*i)})
		}
	case "export", "import":
		size, err := gib(arg)
		if err != nil {
			return err
		}
		var a *vmm.Allocation
		if kind == "import" {
			a, err = m.ImportFD(3, size)
		} else {
			a, err = m.Create(size, vmm.Props{Location: vmm.OnDevice(0), HandleTypes: cu.MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR})
		}
		if err != nil {
			return err
		}
		base, err := mapped(m, a, size)
		if err != nil {
			return err
		}
		spans = append(spans, span{base: base, size: size, first: 1})
		if kind == "import" {
			break
		}
		if err := spans[0].fill(m); err != nil {
			return err
		}
		fd, err := a.ExportFD()
		if err != nil {
			return err
		}
		cmd := reexec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), envChild+"=import:"+arg)
		cmd.ExtraFiles = []*os.File{os.NewFile(uintptr(fd), "exported")}
		cmd.Stderr = os.Stderr
		if peerIn, err = cmd.StdinPipe(); err != nil {
			return err
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			return err
		}
		if err := cmd.Start(); err != nil {
			return err
		}
		defer cmd.Process.Kill()
		peer = bufio.NewReader(out)
		if line, err := peer.ReadString('\n'); err != nil || line != "ready\n" {
			return fmt.Errorf("the importer says %q (%v)", line, err)
		}
		ready = "ready " + strconv.Itoa(cmd.Process.Pid)
	default:
		return fmt.Errorf("unknown child %q", spec)
	}
	if kind == "vmm" || kind == "sleep" {
		for _, s := range spans {
			if err := s.fill(m); err != nil {
				return err
			}
		}
	}
	askPeer := func(cmd string) string {
		if _, err := io.WriteString(peerIn, cmd+"\n"); err != nil {
			return err.Error()
		}
		line, err := peer.ReadString('\n')
		if err != nil {
			return err.Error()
		}
		return strings.TrimSpace(line)
	}
	fmt.Println(ready)
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		cmd, arg, _ := strings.Cut(in.Text(), " ")
		answer := "ok"
		err := func() error {
			switch cmd {
			case "quit":
				if peer != nil {
					askPeer("quit")
				}
				return io.EOF
			case "check":
				for _, s := range spans {
					if err := s.check(m); err != nil {
						return err
					}
				}
				if peer != nil {
					if a := askPeer("check"); a != "ok" {
						return fmt.Errorf("the importer: %s", a)
					}
				}
			case "uuid":
				d, err := cu.DeviceGet(0)
				if err != nil {
					return err
				}
				u, err := d.UUID()
				answer = u.String()
				return err
			case "discard", "wake":
				var err error
				if cmd == "discard" {
					err = pool.Sleep(context.Background(), "kv", sleep.Discard)
					spans[1].zero = true
				} else {
					err = pool.Wake(context.Background(), "kv")
				}
				return err
			case "poke":
				v, err := strconv.Atoi(arg)
				if err != nil {
					return err
				}
				if err := m.WriteAt(0, []byte{byte(v)}, spans[0].base); err != nil {
					return err
				}
				got := askPeer("peek")
				answer = "shared"
				if got != arg {
					answer = "split: the importer reads " + got
				}
				return m.WriteAt(0, []byte{spans[0].first}, spans[0].base)
			case "spin":
				// A kernel that runs for arg milliseconds, and a synchronize that waits for it.
				ms, err := strconv.Atoi(arg)
				if err != nil {
					return err
				}
				return spin(time.Duration(ms) * time.Millisecond)
			case "peek":
				b := make([]byte, 1)
				err := m.ReadAt(0, b, spans[0].base)
				answer = strconv.Itoa(int(b[0]))
				return err
			default:
				return fmt.Errorf("unknown command %q", cmd)
			}
			return nil
		}()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			answer = err.Error()
		}
		fmt.Println(answer)
	}
	return in.Err()
}

func spin(d time.Duration) error {
	dev, err := cu.DeviceGet(0)
	if err != nil {
		return err
	}
	ctx, err := dev.Primary()
	if err != nil {
		return err
	}
	mod, err := ctx.ModuleLoadData([]byte(kernels.Spin))
	if err != nil {
		return err
	}
	defer mod.Unload()
	f, err := mod.Function("spin")
	if err != nil {
		return err
	}
	one := [3]uint32{1, 1, 1}
	if err := ctx.Launch(f, one, one, 0, uint64(d.Nanoseconds())); err != nil {
		return err
	}
	return ctx.Synchronize()
}
