package cu

// drvIndex maps driver values to slot indexes for one shard of the handle table (handles.go):
// an open-addressing hash table with linear probing, kept at most half full, so that a
// lookup, an insert and a removal each touch about one cache line of it. Creating and
// releasing a handle use it right after the driver call, when it is cold in the caches;
// a Go map there (its header, its table, a group's control word and slots), with the free
// slots in a slice, cost a 2 MiB create and release on an H200 about three points more
// over a bare call (cu's BenchmarkGPUCallLayers).
// The shard's lock serializes its use.
type drvIndex struct {
	tab []drvEntry // len is 0 or a power of two
	n   int        // entries in use
}

type drvEntry struct {
	drv  uint64
	slot uint32 // the slot index + 1; 0: the entry is empty
	_    uint32
}

const drvIndexMinLen = 16

// home is where drv's probe sequence starts. The table's shard was picked by the top bits
// of the same product; these bits are independent of them.
func (x *drvIndex) home(drv uint64) int {
	return int((drv*0x9e3779b97f4a7c15)>>32) & (len(x.tab) - 1)
}

// probe returns where drv's entry is, or the empty entry that ends its probe sequence (the
// table is never full, so there is one); the table must not be empty.
func (x *drvIndex) probe(drv uint64) (i int, found bool) {
	for i, m := x.home(drv), len(x.tab)-1; ; i = (i + 1) & m {
		if e := &x.tab[i]; e.slot == 0 || e.drv == drv {
			return i, e.slot != 0
		}
	}
}

// find returns the slot index of drv.
func (x *drvIndex) find(drv uint64) (uint32, bool) {
	if x.n == 0 {
		return 0, false
	}
	i, ok := x.probe(drv)
	if !ok {
		return 0, false
	}
	return x.tab[i].slot - 1, true
}

// put maps drv to slot idx, replacing what drv mapped to.
func (x *drvIndex) put(drv uint64, idx uint32) {
	if 2*(x.n+1) > len(x.tab) {
		x.grow()
	}
	i, ok := x.probe(drv)
	if !ok {
		x.n++
	}
	x.tab[i] = drvEntry{drv: drv, slot: idx + 1}
}

func (x *drvIndex) grow() {
	old := x.tab
	x.tab = make([]drvEntry, max(drvIndexMinLen, 2*len(old)))
	x.n = 0
	for _, e := range old {
		if e.slot != 0 {
			x.put(e.drv, e.slot-1)
		}
	}
}

// remove forgets drv if it maps to slot idx (a slot freed after drv was given to another).
func (x *drvIndex) remove(drv uint64, idx uint32) {
	if x.n == 0 {
		return
	}
	i, ok := x.probe(drv)
	if !ok || x.tab[i].slot != idx+1 {
		return
	}
	m := len(x.tab) - 1
	// Backward-shift deletion: move later entries of the run into the hole when the hole
	// lies on their probe sequence (their home is not cyclically in (hole, j]), so that no
	// lookup stops early at it; then empty the last hole.
	for j := i; ; {
		j = (j + 1) & m
		e := x.tab[j]
		if e.slot == 0 {
			break
		}
		k := x.home(e.drv)
		if i <= j && (k <= i || k > j) || i > j && k <= i && k > j {
			x.tab[i] = e
			i = j
		}
	}
	x.tab[i] = drvEntry{}
	x.n--
}
