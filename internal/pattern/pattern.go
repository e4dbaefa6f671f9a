// Package pattern makes the test data every part of cuvmm writes to memory and checks.
package pattern

// Bytes is n bytes of deterministic data that differ at every byte offset and per seed
// (xorshift32), so that a copy from the wrong place or an offset error shows.
func Bytes(seed byte, n int) []byte {
	p := make([]byte, n)
	x := uint32(seed)*2654435761 + 1
	for i := range p {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		p[i] = byte(x)
	}
	return p
}
