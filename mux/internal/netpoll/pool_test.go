package netpoll

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/wsmux/wsmux/internal/testkit/leakcheck"
	"github.com/wsmux/wsmux/internal/testkit/require"
)

func TestMain(m *testing.M) { leakcheck.VerifyTestMain(m) }

type funcTask func()

func (f funcTask) Run() { f() }

// At most max tasks run at once, every task runs once, and the workers
// exit when the queue is empty (goleak at the end of the package).
func TestPoolBound(t *testing.T) {
	const max, n = 3, 200
	p := NewPool(max)
	var running, peak atomic.Int32
	var wg sync.WaitGroup
	release := make(chan struct{})
	ran := make([]atomic.Int32, n)
	wg.Add(n)
	for i := range n {
		p.Submit(funcTask(func() {
			defer wg.Done()
			r := running.Add(1)
			for {
				pk := peak.Load()
				if r <= pk || peak.CompareAndSwap(pk, r) {
					break
				}
			}
			<-release
			ran[i].Add(1)
			running.Add(-1)
		}))
	}
	require.Equal(t, max, p.Running())
	close(release)
	wg.Wait()
	require.LessOrEqual(t, peak.Load(), int32(max))
	for i := range ran {
		require.Equal(t, int32(1), ran[i].Load(), "task %d", i)
	}
}

// Tasks queued by running tasks still run (the ring grows and wraps).
func TestPoolResubmit(t *testing.T) {
	p := NewPool(2)
	var wg sync.WaitGroup
	var count atomic.Int32
	var task funcTask
	task = func() {
		if count.Add(1) < 1000 {
			wg.Add(2)
			p.Submit(funcTask(func() { defer wg.Done(); task() }))
			p.Submit(funcTask(func() { defer wg.Done() }))
		}
	}
	wg.Add(1)
	p.Submit(funcTask(func() { defer wg.Done(); task() }))
	wg.Wait()
	require.Equal(t, int32(1000), count.Load())
}
