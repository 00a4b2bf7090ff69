package netpoll

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
)

// Timers fire at or after their deadline and within a tick of it, in
// deadline order; a stopped timer never fires; the goroutine exits once
// no timer is set (synctest.Test fails if it stays).
func TestWheelFiresInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const tick = 5 * time.Millisecond
		w := NewWheel(tick, 64) // one turn: 320 ms
		start := time.Now()
		var mu sync.Mutex
		type shot struct {
			i  int
			at time.Duration
		}
		var got []shot
		delays := []time.Duration{time.Millisecond, 7 * time.Millisecond, 7 * time.Millisecond, 100 * time.Millisecond, 319 * time.Millisecond, 321 * time.Millisecond, 2 * time.Second, 10 * time.Second}
		timers := make([]Timer, len(delays)+1)
		for i, d := range delays {
			timers[i].Init(w, func() {
				mu.Lock()
				got = append(got, shot{i, time.Since(start)})
				mu.Unlock()
			})
			timers[i].Reset(d)
		}
		stopped := &timers[len(delays)]
		stopped.Init(w, func() { t.Error("a stopped timer fired") })
		stopped.Reset(50 * time.Millisecond)
		require.Equal(t, len(delays)+1, w.Len())
		require.True(t, stopped.Stop())
		require.False(t, stopped.Stop())
		time.Sleep(11 * time.Second) // fake clock
		synctest.Wait()
		require.Len(t, got, len(delays))
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
		var mu sync.Mutex
		count := make([]int, n)
		timers := make([]Timer, n)
		for i := range timers {
			timers[i].Init(w, func() { mu.Lock(); count[i]++; mu.Unlock() })
			timers[i].Reset(time.Duration(i%3000) * 5 * time.Millisecond)
		}
		time.Sleep(20 * time.Second)
		synctest.Wait()
		for i, c := range count {
			require.Equal(t, 1, c, "timer %d", i)
		}
	})
}
