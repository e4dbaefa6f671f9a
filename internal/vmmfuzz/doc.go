// Package vmmfuzz holds, in its tests, the standing fuzz harness of the whole VMM stack on
// the simulator: random programs of typed operations (vmm.Manager, Allocation,
// Reservation, Mapping), of the building blocks (buffer, sparse, peer, ipc) and of raw
// vmm.Backend calls, run by several goroutines at once against a sim.Sim whose fault
// injection (sim.FailNth) fails calls at random. Programs also pass nil, zero-value and
// closed objects, wrong sizes, overlapping ranges, garbage values and the handles and
// addresses of another Sim.
//
// Each run asserts that nothing panics, that every error names its operation (the typed
// operation, or the driver call for raw ones) and is more than a bare driver result, and
// that once every object is closed (with the faults cleared) both Sims are clean
// (sim.Stats.Clean) and, on Linux, every descriptor the run opened is closed again.
//
// The package has no code of its own; the harness is in its tests:
//
//	go test ./internal/vmmfuzz/                                  # seeded programs, seconds
//	go test -run '^$' -fuzz FuzzConcurrent ./internal/vmmfuzz/   # for as long as you like
package vmmfuzz
