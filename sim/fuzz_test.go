package sim_test

import (
	"bytes"
	"testing"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/sim"
	"github.com/stretchr/testify/require"
)

// FuzzOps runs random operation sequences on a Sim against a simple model of what it should
// hold: no call panics, the counters match the model, and bytes read are the bytes written.
//
//	go test -fuzz FuzzOps ./sim/
func FuzzOps(f *testing.F) {
	f.Add([]byte{0, 2, 3, 0, 0, 4, 0, 5, 0, 1, 6, 0, 2, 7, 0, 8, 0, 1, 0})
	f.Add([]byte{0, 0, 2, 2, 3, 1, 1, 3, 0, 0, 4, 0, 5, 1, 7, 6, 1, 9, 9, 9})
	f.Fuzz(func(t *testing.T, ops []byte) {
		s, err := sim.New(sim.PresetH100())
		require.NoError(t, err)
		type alloc struct{ bytes map[uint64]byte } // sparse model of the allocation
		type mapping struct {
			va     cu.DevicePtr
			a      *alloc
			access bool
		}
		var (
			handles []cu.MemHandle
			allocOf = map[cu.MemHandle]*alloc{}
			resv    []cu.DevicePtr // 2 MiB reservations
			maps    = map[cu.DevicePtr]*mapping{}
		)
		next := func(i *int) int {
			if *i >= len(ops) {
				return 0
			}
			*i++
			return int(ops[*i-1])
		}
		for i := 0; i < len(ops); {
			op := next(&i) % 10
			arg := next(&i)
			switch op {
			case 0: // create
				h, err := s.Create(2*mib, devProp(0, 0), 0)
				require.NoError(t, err)
				handles = append(handles, h)
				allocOf[h] = &alloc{bytes: map[uint64]byte{}}
			case 1: // release
				if len(handles) > 0 {
					k := arg % len(handles)
					require.NoError(t, s.Release(handles[k]))
					handles = append(handles[:k], handles[k+1:]...)
				}
			case 2: // reserve
				va, err := s.Reserve(2*mib, 0, 0, 0)
				require.NoError(t, err)
				resv = append(resv, va)
			case 3: // map
				if len(handles) > 0 && len(resv) > 0 {
					h, va := handles[arg%len(handles)], resv[arg%len(resv)]
					err := s.Map(va, 2*mib, 0, h, 0)
					if maps[va] != nil {
						require.ErrorIs(t, err, cu.ERROR_INVALID_VALUE)
					} else {
						require.NoError(t, err)
						maps[va] = &mapping{va: va, a: allocOf[h]}
					}
				}
			case 4, 5, 6: // set access, write, read
				if len(resv) == 0 {
					break
				}
				va := resv[arg%len(resv)]
				m := maps[va]
				off := uint64(arg*4099) % (2*mib - 64)
				buf := bytes.Repeat([]byte{byte(arg + 1)}, 64)
				var err error
				switch op {
				case 4:
					err = s.SetAccess(va, 2*mib, rwDesc(0))
					if m != nil {
						m.access = true
					}
				case 5:
					err = s.CopyHtoD(0, va+cu.DevicePtr(off), buf)
					if m != nil && m.access {
						for j := range buf {
							m.a.bytes[off+uint64(j)] = buf[j]
						}
					}
				case 6:
					got := make([]byte, 64)
					err = s.CopyDtoH(0, got, va+cu.DevicePtr(off))
					if err == nil {
						for j := range got {
							require.Equal(t, m.a.bytes[off+uint64(j)], got[j], "byte %d", off+uint64(j))
						}
					}
				}
				if m == nil || (op != 4 && !m.access) {
					require.ErrorIs(t, err, cu.ERROR_INVALID_VALUE)
				} else {
					require.NoError(t, err)
				}
			case 7: // unmap
				if len(resv) > 0 {
					va := resv[arg%len(resv)]
					require.NoError(t, s.Unmap(va, 2*mib)) // unmapping nothing is fine too
					delete(maps, va)
				}
			case 8: // free
				if len(resv) > 0 {
					k := arg % len(resv)
					err := s.Free(resv[k], 2*mib)
					if maps[resv[k]] != nil {
						require.ErrorIs(t, err, cu.ERROR_INVALID_VALUE)
					} else {
						require.NoError(t, err)
						resv = append(resv[:k], resv[k+1:]...)
					}
				}
			case 9: // garbage: never a panic, always an error
				v := cu.MemHandle(arg) * 0x1357
				require.Error(t, s.Release(v))
				require.Error(t, s.Map(cu.DevicePtr(arg)<<12, 2*mib, 0, v, 0))
				_, err := s.Retain(cu.DevicePtr(arg))
				require.Error(t, err)
			}
			st := s.Stats()
			require.Equal(t, len(handles), st.Handles)
			require.Equal(t, len(resv), st.Reservations)
			require.Equal(t, len(maps), st.Mappings)
		}
		for va := range maps {
			require.NoError(t, s.Unmap(va, 2*mib))
		}
		for _, va := range resv {
			require.NoError(t, s.Free(va, 2*mib))
		}
		for _, h := range handles {
			require.NoError(t, s.Release(h))
		}
		require.True(t, s.Stats().Clean(), "%+v", s.Stats())
	})
}
