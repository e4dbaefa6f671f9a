package sim

import (
	"encoding/hex"
	"strconv"
	"testing"
)

// FuzzFileName parses memfd names, which another process chooses: the name of a
// descriptor it sends is how sim tells what the descriptor holds. Only the names sim makes
// parse (one spelling per device and secret), and a fabric name's secret has the length of
// a token's, so that it can match one.
//
//	go test -run '^$' -fuzz '^FuzzFileName$' ./sim/
func FuzzFileName(f *testing.F) {
	var secret [32]byte
	for i := range secret {
		secret[i] = byte(i * 7)
	}
	for _, name := range []string{
		fileName(0, nil), fileName(3, nil), fileName(12, &secret), "cuvmm-sim.d00", "cuvmm-sim.d0x",
		"cuvmm-sim.f0.xyz", "cuvmm-sim.d99999", "cuvmm-sim.d-1", "cuvmm-sim.f1." + hex.EncodeToString(secret[:]) + "0",
	} {
		f.Add(name)
	}
	f.Fuzz(func(t *testing.T, name string) {
		dev, sec, ok := parseFileName(name)
		if !ok {
			return
		}
		want := shareName + strconv.Itoa(dev)
		if sec != "" {
			want = fabricName + strconv.Itoa(dev) + "." + sec
		}
		if dev < 0 || dev > 9999 || name != want || (sec != "" && len(sec) != 2*len(secret)) {
			t.Fatalf("%q parses to device %d, digest %q", name, dev, sec)
		}
	})
}
