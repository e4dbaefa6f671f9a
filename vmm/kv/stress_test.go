package kv_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/sim"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/cuvmm/cuvmm/vmm/kv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStress grows and releases every slot from its own goroutine while another trims, with
// and without a committer and a limit, and checks after every Ensure that succeeded that
// each page its tokens need is mapped in every plane (STRESS_MS sets each run's length).
func TestStress(t *testing.T) {
	dur := time.Second
	if v, err := strconv.Atoi(os.Getenv("STRESS_MS")); err == nil {
		dur = time.Duration(v) * time.Millisecond
	}
	for _, opts := range []kv.Options{{Ahead: 1, Limit: 10 * 2 * 2 * mib}, {Ahead: 2, Limit: 9 * 2 * 2 * mib}, {Ahead: 1}, {Limit: 8 * 2 * 2 * mib}} {
		t.Run(fmt.Sprintf("%+v", opts), func(t *testing.T) {
			s, err := sim.New(sim.PresetH200())
			require.NoError(t, err)
			g := kv.Geometry{Planes: 2, BytesPerToken: 2048, Slots: 4, MaxTokens: 4096}
			c, err := kv.New(vmm.New(s), g, opts)
			require.NoError(t, err)
			var mu sync.Mutex
			errs := map[string]int{}
			note := func(k string) { mu.Lock(); errs[k]++; mu.Unlock() }
			stop := time.Now().Add(dur)
			var wg sync.WaitGroup
			for slot := range g.Slots {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r := rand.New(rand.NewPCG(uint64(slot), 1))
					for time.Now().Before(stop) {
						tok := 1
						for tok <= g.MaxTokens && time.Now().Before(stop) {
							err := c.Ensure(slot, tok)
							switch {
							case errors.Is(err, vmm.ErrTooLarge):
								note("too large")
							case err != nil:
								note("ensure error: " + err.Error())
							default:
								need := (tok*2048 + 2*mib - 1) / (2 * mib)
								for i := range g.Planes {
									for p := range need {
										addr := c.Plane(i) + cu.DevicePtr(uint64(slot)*c.SlotBytes()+uint64(p)*c.PageSize())
										if _, _, err := s.AddressRange(addr); err != nil {
											note(fmt.Sprintf("Ensure(%d,%d) ok but plane %d page %d not mapped", slot, tok, i, p))
										}
									}
								}
								note("ok")
							}
							tok += 1 + r.IntN(700)
						}
						c.Release(slot)
					}
				}()
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(stop) {
					if err := c.Trim(); err != nil {
						note("trim error: " + err.Error())
					}
					time.Sleep(time.Duration(rand.IntN(300)) * time.Microsecond)
				}
			}()
			wg.Wait()
			// The committer may be in the middle of a commit: let it settle before the
			// accounts are compared.
			if r := c.Ready(); r != nil {
				note("ready: " + r.Error())
			}
			// Ready does not wait for the committer's trims of the released slots, which
			// move both accounts: compare them when the cache's did not change across the
			// sim's reading, and they agree, or at the deadline.
			var st kv.Stats
			var committed uint64
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
				st, committed = c.Stats(), s.Stats().Committed[0]
				if (st == c.Stats() && st.Bytes == committed) || time.Now().After(deadline) {
					break
				}
			}
			t.Logf("stats %+v sim committed %d", st, committed)
			assert.Equal(t, st.Bytes, committed, "Bytes drift")
			for k, v := range errs {
				t.Logf("%6d %s", v, k)
			}
			require.NoError(t, c.Close())
			assert.True(t, s.Stats().Clean(), "%+v", s.Stats())
			for k := range errs {
				if k != "ok" && k != "too large" {
					t.Errorf("unexpected: %s", k)
				}
			}
		})
	}
}
