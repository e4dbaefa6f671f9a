package sim

import (
	"sync/atomic"
	"unsafe"
)

// stripes is how many parts a striped structure can have: stripe returns fewer than this,
// and counters, budgets and handle shards divide it.
const (
	stripeBits = 6
	stripes    = 1 << stripeBits
)

// stripe picks a part of a striped structure for the calling goroutine, from its stack
// address: goroutines on different cores have different stacks, so they mostly write
// different cache lines. A stack that moves, or a call made deeper in it, may pick another
// stripe; every user is correct with any stripe, and only loses locality. The address is
// hashed, so that stacks spaced by any power of two still spread over the stripes.
func stripe() uint64 {
	var here byte
	return (uint64(uintptr(unsafe.Pointer(&here))>>11) * 0x9e3779b97f4a7c15) >> (64 - stripeBits)
}

// counterStripes is how many cache lines a counter is spread over.
const counterStripes = 8

// counter is a count that many goroutines update: each goroutine updates its stripe, and a
// read sums the stripes. A counter written by every call on one line would make every core
// wait for that line, and the Sim would not scale with cores.
type counter struct {
	stripes [counterStripes]struct {
		n atomic.Int64
		_ [56]byte
	}
}

func (c *counter) add(d int64) { c.stripes[stripe()%counterStripes].n.Add(d) }

func (c *counter) load() int64 {
	var n int64
	for i := range c.stripes {
		n += c.stripes[i].n.Load()
	}
	return n
}
