package flow

import (
	"testing"
	"time"

	"github.com/wsmux/wsmux/internal/testkit/require"
)

// Tests of Receiver.SetLimit: the window shrinking to a limit and growing
// back once the limit is removed.

// TestReceiverSetLimit: a window above the limit shrinks as the
// application reads (less credit is announced than consumed, never below
// Initial), growth stops at the limit, the Budget gets the shrunk bytes
// back, and removing the limit lets the window grow again.
func TestReceiverSetLimit(t *testing.T) {
	const rtt = 10 * time.Millisecond
	b := unlimited()
	r := newReceiver(t, ReceiverConfig{Initial: 1000, Max: 16000, Budget: b}, 1000)
	var s Sender
	s.Init(1000)
	require.True(t, s.Consume(1000))
	// Fast epochs: 1000 -> 2000 -> 4000 -> 8000.
	read := func(n int) {
		t.Helper()
		for n > 0 {
			k := min(n, int(s.Available()))
			require.Positive(t, k, "sender out of credit")
			require.True(t, s.Consume(k))
			require.NoError(t, r.Receive(k))
			if d := r.Consume(k, 0, rtt); d > 0 {
				require.NoError(t, s.Grant(d))
			}
			require.NoError(t, r.check())
			require.Equal(t, r.Outstanding()+r.Buffered(), s.Available()+r.Buffered())
			n -= k
		}
	}
	if d := r.Consume(1000, 0, rtt); d > 0 {
		require.NoError(t, s.Grant(d))
	}
	read(12000)
	require.EqualValues(t, 16000, r.Window())
	require.EqualValues(t, 15000, b.used)

	r.SetLimit(3000)
	read(40000)
	require.EqualValues(t, 3000, r.Window(), "the window shrinks to the limit as bytes are read")
	require.EqualValues(t, 2000, b.used, "the shrunk bytes went back to the budget")
	require.LessOrEqual(t, s.Available(), int64(3000))

	r.SetLimit(10) // below Initial: Initial is the floor
	read(40000)
	require.EqualValues(t, 1000, r.Window())
	require.Zero(t, b.used)

	r.SetLimit(0) // no limit: fast epochs grow it again
	read(40000)
	require.EqualValues(t, 16000, r.Window())

	t.Run("below Initial", func(t *testing.T) {
		b := unlimited()
		var r Receiver
		r.Init(ReceiverConfig{Initial: 256 << 10, Max: 1 << 20, Budget: b})
		var s Sender
		s.Init(r.Window())
		// pump lets the peer send all its credit and the application read
		// it, 100 times.
		pump := func() {
			t.Helper()
			for range 100 {
				k := int(s.Available())
				require.True(t, s.Consume(k))
				require.NoError(t, r.Receive(k))
				if d := r.Consume(k, 0, 0); d > 0 {
					require.NoError(t, s.Grant(d))
				}
				require.NoError(t, r.check())
			}
		}
		r.SetLimit(1) // held at MinLimitWindow
		pump()
		require.EqualValues(t, MinLimitWindow, r.Window())
		require.Zero(t, b.used, "Initial is never charged")
		r.SetLimit(0)
		pump()
		require.EqualValues(t, 256<<10, r.Window(), "back to Initial, no growth without an RTT")
		require.Zero(t, b.used)
	})
}
