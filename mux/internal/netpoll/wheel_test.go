package netpoll

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/wsmux/wsmux/internal/testkit/require"
)

// Timers fire at or after their deadline and within a tick of it, in
// deadline order; a stopped timer never fires; the goroutine exits once
// no timer is set (synctest.Test fails if it stays).
func TestWheelFiresInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const tick = 5 * time.Millisecond
		w := NewWheel(tick, 64) // one turn: 320 ms
		start := time.Now()
		type shot struct {
			i  int
			at time.Duration
		}
		delays := []time.Duration{time.Millisecond, 7 * time.Millisecond, 7 * time.Millisecond, 100 * time.Millisecond, 319 * time.Millisecond, 321 * time.Millisecond, 2 * time.Second, 10 * time.Second}
		shots := make(chan shot, len(delays))
		timers := make([]Timer, len(delays)+1)
		for i, d := range delays {
			timers[i].Init(w, func() { shots <- shot{i, time.Since(start)} })
			timers[i].Reset(d)
		}
		stopped := &timers[len(delays)]
		stopped.Init(w, func() { t.Error("a stopped timer fired") })
		stopped.Reset(50 * time.Millisecond)
		require.Equal(t, len(delays)+1, w.Len())
		require.True(t, stopped.Stop())
		require.False(t, stopped.Stop())
		// Waiting for each timer lets the bubble's clock run to it.
		got := make([]shot, 0, len(delays))
		for range delays {
			got = append(got, <-shots)
		}
		synctest.Wait()
		require.Empty(t, shots, "a timer fired twice")
		for k, s := range got {
			d := delays[s.i]
			require.GreaterOrEqual(t, s.at, d, "timer %d early", s.i)
			require.Less(t, s.at, d+tick, "timer %d more than a tick late", s.i)
			if k > 0 {
				require.LessOrEqual(t, delays[got[k-1].i], d, "out of order")
			}
		}
		require.Zero(t, w.Len())
	})
}

// A Reset to an earlier deadline wakes the sleeping goroutine; a Reset to
// a later one postpones the timer.
func TestWheelReset(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := NewWheel(time.Millisecond, 128)
		fired := make(chan time.Duration, 4)
		start := time.Now()
		var a, b Timer
		a.Init(w, func() { fired <- time.Since(start) })
		b.Init(w, func() { fired <- -time.Since(start) })
		b.Reset(time.Hour) // the goroutine sleeps for the turn
		a.Reset(time.Minute)
		a.Reset(10 * time.Millisecond) // earlier: wakes it
		require.Equal(t, 10*time.Millisecond, <-fired)
		a.Reset(20 * time.Millisecond)
		a.Reset(40 * time.Millisecond) // later: postponed
		require.Equal(t, 50*time.Millisecond, <-fired)
		require.True(t, b.Stop())
		synctest.Wait()
		require.Zero(t, w.Len())
	})
}

// Many timers in one wheel: each fires once.
func TestWheelMany(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := NewWheel(10*time.Millisecond, 512)
		const n = 20000
		fired := make(chan int, n)
		timers := make([]Timer, n)
		for i := range timers {
			timers[i].Init(w, func() { fired <- i })
			timers[i].Reset(time.Duration(i%3000) * 5 * time.Millisecond)
		}
		count := make([]int, n)
		for range n {
			count[<-fired]++
		}
		synctest.Wait()
		require.Empty(t, fired, "a timer fired twice")
		for i, c := range count {
			require.Equal(t, 1, c, "timer %d", i)
		}
	})
}
