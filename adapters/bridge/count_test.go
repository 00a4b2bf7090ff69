package bridge

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
)

func TestCountWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var c count
		require.True(t, c.wait(time.Second), "zero at the start")

		// A wait that times out returns false and leaves no goroutine
		// (synctest fails a bubble that ends with one blocked).
		c.Add(1)
		start := time.Now()
		require.False(t, c.wait(2*time.Second))
		require.Equal(t, 2*time.Second, time.Since(start))

		// Growing while waited on, then reaching zero, ends the wait.
		done := make(chan bool)
		go func() { done <- c.wait(time.Minute) }()
		synctest.Wait()
		c.Add(2)
		c.Done()
		c.Done()
		synctest.Wait()
		select {
		case <-done:
			t.Fatal("wait returned with the count at 1")
		default:
		}
		c.Done()
		require.True(t, <-done)
		require.Panics(t, func() { c.Done() })
	})
}
