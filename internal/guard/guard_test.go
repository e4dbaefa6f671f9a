package guard

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestEnterExit(t *testing.T) {
	var g Guard
	// Two entries: the guard counts them.
	for range 2 {
		if !g.Enter(0) {
			t.Fatal("the zero Guard is open at generation 0")
		}
	}
	if g.Enter(1) {
		t.Fatal("Enter of another generation succeeded")
	}
	g.Exit()
	g.Exit()
	if !g.Drain() {
		t.Fatal("Drain of an open guard failed")
	}
	if g.Enter(0) {
		t.Fatal("Enter succeeded while drained")
	}
	if g.Drain() {
		t.Fatal("a second Drain succeeded")
	}
	g.Reopen()
	if !g.Enter(0) {
		t.Fatal("Enter failed after Reopen")
	}
	g.Exit()
	g.Drain()
	if g.Open() || g.Retired() {
		t.Fatal("a draining guard is neither open nor retired")
	}
	g.Retire()
	if g.Open() || !g.Retired() || g.Enter(0) || g.Enter(1) || g.Drain() {
		t.Fatal("a retired guard let a call in")
	}
	if gen := g.Revive(); gen != 1 || !g.Enter(1) || g.Enter(0) || g.Retired() {
		t.Fatalf("Revive: generation %d", gen)
	}
	g.Exit()
}

func TestRetireSkipsGenerationZero(t *testing.T) {
	var g Guard
	g.state.Store(uint64(^uint32(0)) << genShift)
	g.Drain()
	g.Retire()
	if gen := g.Revive(); gen != 1 {
		t.Fatalf("generation after wrap-around is %d, want 1", gen)
	}
}

func TestDrainWaitsForCalls(t *testing.T) {
	var g Guard
	for range 3 {
		g.Enter(0)
	}
	drained := make(chan struct{})
	go func() { g.Drain(); close(drained) }()
	for g.Open() {
		time.Sleep(time.Millisecond)
	}
	for i := range 3 {
		select {
		case <-drained:
			t.Fatalf("Drain returned with %d calls in flight", 3-i)
		case <-time.After(5 * time.Millisecond):
		}
		g.Exit()
	}
	<-drained
}

// TestNoCallAfterDrain has goroutines enter and exit while others drain, reopen, retire and
// revive: a call must never be inside while a drain has returned and not reopened.
func TestNoCallAfterDrain(t *testing.T) {
	var g Guard
	var inside, closed atomic.Int32
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				gen := g.Gen()
				if g.Enter(gen) {
					inside.Add(1)
					if closed.Load() != 0 {
						t.Error("a call entered a drained guard")
					}
					inside.Add(-1)
					g.Exit()
				}
			}
		}()
	}
	for i := range 2000 {
		if g.Drain() {
			closed.Store(1)
			if inside.Load() != 0 {
				t.Fatal("Drain returned with a call inside")
			}
			if i%2 == 0 {
				closed.Store(0)
				g.Reopen()
			} else {
				g.Retire()
				closed.Store(0)
				g.Revive()
			}
		}
	}
	close(stop)
	wg.Wait()
}

func TestEnterExitAllocateNothing(t *testing.T) {
	var g Guard
	if n := testing.AllocsPerRun(1000, func() { g.Enter(0); g.Exit() }); n != 0 {
		t.Fatalf("%v allocations", n)
	}
}

func BenchmarkEnterExit(b *testing.B) {
	var g Guard
	for b.Loop() {
		g.Enter(0)
		g.Exit()
	}
}
