// Package treap is an ordered map from uint64 keys to values, for the simulator's address
// space and vmm.Region's chunks.
package treap

// Tree is an ordered map from uint64 keys to values: a treap (a binary search tree whose
// nodes also form a heap on random priorities), so insert, delete and the floor and ceiling
// lookups cost O(log n) expected time whatever the order of the keys. Priorities come from
// a per-tree splitmix64 sequence, so a tree built by the same calls has the same shape:
// the simulator stays deterministic. The zero Tree is empty and ready.
//
// Each node carries a span (the length of the range it stands for) and the largest span in
// its subtree, which lets FirstFit find the lowest-keyed node with a span of at least n in
// O(log n): the simulator's free-address tree uses it to place reservations.
type Tree[V any] struct {
	root *Node[V]
	n    int
	// Seed starts the priorities' sequence: trees built alike with different seeds have
	// different shapes.
	Seed uint64
	free *Node[V] // nodes kept for reuse, linked through right
}

// Node is one key of a Tree, its span and its value. Key and Span are read-only (Resize
// changes them); Val is the caller's, and stays at its address until the key is deleted.
type Node[V any] struct {
	Key, Span   uint64
	Val         V
	prio, max   uint64
	left, right *Node[V]
}

// Len is the number of keys in t.
func (t *Tree[V]) Len() int { return t.n }

func (t *Tree[V]) rand() uint64 {
	t.Seed += 0x9e3779b97f4a7c15
	z := t.Seed
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

func (n *Node[V]) fix() {
	n.max = n.Span
	if n.left != nil {
		n.max = max(n.max, n.left.max)
	}
	if n.right != nil {
		n.max = max(n.max, n.right.max)
	}
}

// split returns the nodes with keys < key and those with keys >= key.
func split[V any](n *Node[V], key uint64) (l, r *Node[V]) {
	if n == nil {
		return nil, nil
	}
	if n.Key < key {
		n.right, r = split(n.right, key)
		n.fix()
		return n, r
	}
	l, n.left = split(n.left, key)
	n.fix()
	return l, n
}

// merge joins two treaps whose keys are all ordered a < b.
func merge[V any](a, b *Node[V]) *Node[V] {
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

// Insert adds key (which must not be present) and returns its node, whose val stays where
// it is until the key is deleted.
func (t *Tree[V]) Insert(key, span uint64, v V) *Node[V] {
	nd := t.free
	if nd != nil {
		t.free = nd.right
		nd.right = nil
	} else {
		nd = new(Node[V])
	}
	nd.Key, nd.Span, nd.max, nd.Val, nd.prio = key, span, span, v, t.rand()
	l, r := split(t.root, key)
	t.root = merge(merge(l, nd), r)
	t.n++
	return nd
}

// Delete removes key and reports whether it was present.
func (t *Tree[V]) Delete(key uint64) bool {
	var nd *Node[V]
	t.root, nd = remove(t.root, key)
	if nd == nil {
		return false
	}
	var zero V
	nd.left, nd.Val = nil, zero
	nd.right, t.free = t.free, nd
	t.n--
	return true
}

// remove takes the node with key out of the subtree n, putting the merge of its children
// in its place and fixing the maxima on the way back up; it returns the subtree and the
// node (nil when key is not there).
func remove[V any](n *Node[V], key uint64) (root, gone *Node[V]) {
	switch {
	case n == nil:
		return nil, nil
	case key < n.Key:
		n.left, gone = remove(n.left, key)
	case key > n.Key:
		n.right, gone = remove(n.right, key)
	default:
		return merge(n.left, n.right), n
	}
	n.fix()
	return n, gone
}

// Resize changes the key and span of the node with key, which must keep its place in the
// key order (a free range that shrinks from its front, or grows backwards into freed
// space), and fixes the maxima above it: cheaper than a delete and an insert, and the
// common case when reservations come and go at the edge of the free space.
func (t *Tree[V]) Resize(key, newKey, newSpan uint64) { resize(t.root, key, newKey, newSpan) }

func resize[V any](n *Node[V], key, newKey, newSpan uint64) bool {
	switch {
	case n == nil:
		return false
	case key == n.Key:
		n.Key, n.Span = newKey, newSpan
	case key < n.Key && !resize(n.left, key, newKey, newSpan),
		key > n.Key && !resize(n.right, key, newKey, newSpan):
		return false
	}
	n.fix()
	return true
}

// Get returns the node with key, or nil.
func (t *Tree[V]) Get(key uint64) *Node[V] {
	if n := t.Floor(key); n != nil && n.Key == key {
		return n
	}
	return nil
}

// Floor returns the node with the greatest key <= key, or nil.
func (t *Tree[V]) Floor(key uint64) *Node[V] {
	var best *Node[V]
	for n := t.root; n != nil; {
		if n.Key <= key {
			best, n = n, n.right
		} else {
			n = n.left
		}
	}
	return best
}

// Ceil returns the node with the least key >= key, or nil.
func (t *Tree[V]) Ceil(key uint64) *Node[V] {
	var best *Node[V]
	for n := t.root; n != nil; {
		if n.Key >= key {
			best, n = n, n.left
		} else {
			n = n.right
		}
	}
	return best
}

// FirstFit returns the node with the least key whose span is at least n, or nil.
func (t *Tree[V]) FirstFit(n uint64) *Node[V] { return firstFitFrom(t.root, 0, n) }

// FirstFitFrom returns the node with the least key >= from whose span is at least n, or
// nil: FirstFit's search, started past the ranges already tried.
func (t *Tree[V]) FirstFitFrom(from, n uint64) *Node[V] {
	return firstFitFrom(t.root, from, n)
}

func firstFitFrom[V any](nd *Node[V], from, n uint64) *Node[V] {
	if nd == nil || nd.max < n {
		return nil
	}
	if nd.Key >= from {
		if l := firstFitFrom(nd.left, from, n); l != nil {
			return l
		}
		if nd.Span >= n {
			return nd
		}
	}
	return firstFitFrom(nd.right, from, n)
}
