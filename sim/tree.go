package sim

// tree is an ordered map from uint64 keys to values: a treap (a binary search tree whose
// nodes also form a heap on random priorities), so insert, delete and the floor and ceiling
// lookups cost O(log n) expected time whatever the order of the keys. Priorities come from
// a per-tree splitmix64 sequence, so a tree built by the same calls has the same shape:
// the simulator stays deterministic.
//
// Each node carries a span (the length of the range it stands for) and the largest span in
// its subtree, which lets firstFit find the lowest-keyed node with a span of at least n in
// O(log n): the free-address tree uses it to place reservations.
type tree[V any] struct {
	root *node[V]
	n    int
	seed uint64
	free *node[V] // nodes kept for reuse, linked through right
}

type node[V any] struct {
	key         uint64
	prio        uint64
	span, max   uint64
	left, right *node[V]
	val         V
}

func (t *tree[V]) rand() uint64 {
	t.seed += 0x9e3779b97f4a7c15
	z := t.seed
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

func (n *node[V]) fix() {
	m := n.span
	if n.left != nil && n.left.max > m {
		m = n.left.max
	}
	if n.right != nil && n.right.max > m {
		m = n.right.max
	}
	n.max = m
}

// split returns the nodes with keys < key and those with keys >= key.
func split[V any](n *node[V], key uint64) (l, r *node[V]) {
	if n == nil {
		return nil, nil
	}
	if n.key < key {
		n.right, r = split(n.right, key)
		n.fix()
		return n, r
	}
	l, n.left = split(n.left, key)
	n.fix()
	return l, n
}

// merge joins two treaps whose keys are all ordered a < b.
func merge[V any](a, b *node[V]) *node[V] {
	if a == nil {
		return b
	}
	if b == nil {
		return a
	}
	if a.prio > b.prio {
		a.right = merge(a.right, b)
		a.fix()
		return a
	}
	b.left = merge(a, b.left)
	b.fix()
	return b
}

// insert adds key (which must not be present) and returns its node, whose val stays where
// it is until the key is deleted.
func (t *tree[V]) insert(key, span uint64, v V) *node[V] {
	nd := t.free
	if nd != nil {
		t.free = nd.right
		nd.right = nil
	} else {
		nd = new(node[V])
	}
	nd.key, nd.span, nd.max, nd.val, nd.prio = key, span, span, v, t.rand()
	l, r := split(t.root, key)
	t.root = merge(merge(l, nd), r)
	t.n++
	return nd
}

// delete removes key and reports whether it was present.
func (t *tree[V]) delete(key uint64) bool {
	var zero V
	// Walk down to the node, remembering the link that points at it, then replace it by the
	// merge of its children, fixing the augmented maxima on the way back up.
	var path [128]*node[V]
	depth := 0
	link := &t.root
	for *link != nil && (*link).key != key {
		path[depth] = *link
		depth++
		if depth == len(path) {
			return t.deleteSlow(key)
		}
		if key < (*link).key {
			link = &(*link).left
		} else {
			link = &(*link).right
		}
	}
	nd := *link
	if nd == nil {
		return false
	}
	*link = merge(nd.left, nd.right)
	for i := depth - 1; i >= 0; i-- {
		path[i].fix()
	}
	nd.left, nd.val = nil, zero
	nd.right, t.free = t.free, nd
	t.n--
	return true
}

// resize changes the key and span of the node with key, which must keep its place in the
// key order (a free range that shrinks from its front, or grows backwards into freed
// space), and fixes the maxima above it: cheaper than a delete and an insert, and the
// common case when reservations come and go at the edge of the free space.
func (t *tree[V]) resize(key, newKey, newSpan uint64) { resize(t.root, key, newKey, newSpan) }

func resize[V any](n *node[V], key, newKey, newSpan uint64) bool {
	switch {
	case n == nil:
		return false
	case key == n.key:
		n.key, n.span = newKey, newSpan
	case key < n.key && !resize(n.left, key, newKey, newSpan),
		key > n.key && !resize(n.right, key, newKey, newSpan):
		return false
	}
	n.fix()
	return true
}

// deleteSlow handles the (astronomically unlikely) tree deeper than delete's path buffer.
func (t *tree[V]) deleteSlow(key uint64) bool {
	l, r := split(t.root, key)
	m, r := split(r, key+1)
	t.root = merge(l, r)
	if m == nil {
		return false
	}
	t.n--
	return true
}

// get returns the node with key, or nil.
func (t *tree[V]) get(key uint64) *node[V] {
	n := t.root
	for n != nil && n.key != key {
		if key < n.key {
			n = n.left
		} else {
			n = n.right
		}
	}
	return n
}

// floor returns the node with the greatest key <= key, or nil.
func (t *tree[V]) floor(key uint64) *node[V] {
	var best *node[V]
	for n := t.root; n != nil; {
		if n.key <= key {
			best, n = n, n.right
		} else {
			n = n.left
		}
	}
	return best
}

// ceil returns the node with the least key >= key, or nil.
func (t *tree[V]) ceil(key uint64) *node[V] {
	var best *node[V]
	for n := t.root; n != nil; {
		if n.key >= key {
			best, n = n, n.left
		} else {
			n = n.right
		}
	}
	return best
}

// firstFit returns the node with the least key whose span is at least n, or nil.
func (t *tree[V]) firstFit(n uint64) *node[V] {
	for nd := t.root; nd != nil; {
		switch {
		case nd.left != nil && nd.left.max >= n:
			nd = nd.left
		case nd.span >= n:
			return nd
		case nd.right != nil && nd.right.max >= n:
			nd = nd.right
		default:
			return nil
		}
	}
	return nil
}

// firstFitFrom returns the node with the least key >= from whose span is at least n, or
// nil: firstFit's search, started past the ranges already tried.
func (t *tree[V]) firstFitFrom(from, n uint64) *node[V] {
	return firstFitFrom(t.root, from, n)
}

func firstFitFrom[V any](nd *node[V], from, n uint64) *node[V] {
	if nd == nil || nd.max < n {
		return nil
	}
	if nd.key >= from {
		if l := firstFitFrom(nd.left, from, n); l != nil {
			return l
		}
		if nd.span >= n {
			return nd
		}
	}
	return firstFitFrom(nd.right, from, n)
}
