package flow

import (
	"math"
	"testing"
	"time"

	"github.com/wsmux/wsmux/internal/testkit/require"
)

// Tests of the receiver's auto-tuning: the window doubling after fast
// epochs, and fastEpoch, the test behind it.

// TestReceiverAutoTune covers quic-go's doubling rule. The window is 1000
// bytes and the RTT 10 ms. A first read of 250 bytes at t=0 starts the
// epoch and sends an update (250 is not more than half the window, so no
// tuning); a second read of 251 bytes at `at` is due with 501 bytes read in
// the epoch: the fraction is 0.501, and the window doubles if
// at < 4 × 0.501 × 10 ms = 20.04 ms.
func TestReceiverAutoTune(t *testing.T) {
	const rtt = 10 * time.Millisecond
	const limit = 20040 * time.Microsecond
	for _, tc := range []struct {
		name   string
		max    uint32
		budget *testBudget
		at     time.Duration
		rtt    time.Duration
		window uint32 // after the second read
		delta  uint32 // of the second read
	}{
		{"fast epoch doubles", 4000, nil, time.Millisecond, rtt, 2000, 251 + 1000},
		{"one ns below the limit doubles", 4000, nil, limit - 1, rtt, 2000, 1251},
		{"exactly the limit does not", 4000, nil, limit, rtt, 1000, 251},
		{"slow epoch does not", 4000, nil, time.Second, rtt, 1000, 251},
		{"unknown rtt does not", 4000, nil, 0, 0, 1000, 251},
		{"negative rtt does not", 4000, nil, 0, -rtt, 1000, 251},
		{"capped at max", 1500, nil, 0, rtt, 1500, 251 + 500},
		{"max equal initial disables", 1000, nil, 0, rtt, 1000, 251},
		{"budget approves", 4000, unlimited(), 0, rtt, 2000, 1251},
		{"budget refuses", 4000, &testBudget{limit: math.MaxInt64, refuse: true}, 0, rtt, 1000, 251},
		{"budget too small", 4000, &testBudget{limit: 999}, 0, rtt, 1000, 251},
		{"budget just enough", 4000, &testBudget{limit: 1000}, 0, rtt, 2000, 1251},
		{"clock going backwards counts as fast", 4000, nil, -time.Second, rtt, 2000, 1251},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := ReceiverConfig{Initial: 1000, Max: tc.max}
			if tc.budget != nil {
				cfg.Budget = tc.budget
			}
			r := newReceiver(t, cfg, 1000)
			require.EqualValues(t, 250, r.Consume(250, 0, tc.rtt))
			require.EqualValues(t, 1000, r.Window())
			require.Equal(t, tc.delta, r.Consume(251, tc.at, tc.rtt))
			require.Equal(t, tc.window, r.Window())
			require.Zero(t, r.Pending())
			require.NoError(t, r.check())
			if tc.budget != nil {
				require.EqualValues(t, tc.window-1000, tc.budget.used)
				r.Release()
				require.Zero(t, tc.budget.used)
			}
		})
	}

	t.Run("exactly half the window does not double", func(t *testing.T) {
		r := newReceiver(t, ReceiverConfig{Initial: 1000, Max: 4000}, 1000)
		require.EqualValues(t, 250, r.Consume(250, 0, rtt))
		require.EqualValues(t, 250, r.Consume(250, 0, rtt))
		require.EqualValues(t, 1000, r.Window())
		// The epoch was not evaluated, so it goes on: one more byte read
		// later still counts the first 500.
		require.Zero(t, r.Consume(1, 0, rtt))
		require.EqualValues(t, 250+1000, r.Consume(249, 0, rtt))
		require.EqualValues(t, 2000, r.Window())
		require.NoError(t, r.check())
	})

	t.Run("a new epoch starts after each evaluation", func(t *testing.T) {
		r := newReceiver(t, ReceiverConfig{Initial: 1000, Max: 1 << 20}, 1000)
		// Epoch 1 starts at the first read, at 1 ms, and reads the whole
		// window at once: doubles to 2000.
		require.EqualValues(t, 1000+1000, r.Consume(1000, time.Millisecond, rtt))
		require.EqualValues(t, 2000, r.Window())
		// Epoch 2 starts at 1 ms: 2000 bytes at 1 s is slow.
		require.NoError(t, r.Receive(2000))
		require.EqualValues(t, 2000, r.Consume(2000, time.Second, rtt))
		require.EqualValues(t, 2000, r.Window())
		// Epoch 3 starts at 1 s: 2000 bytes 10 ms later is fast.
		require.NoError(t, r.Receive(2000))
		require.EqualValues(t, 2000+2000, r.Consume(2000, time.Second+rtt, rtt))
		require.EqualValues(t, 4000, r.Window())
		require.NoError(t, r.check())
	})

	t.Run("the first epoch starts at the first read", func(t *testing.T) {
		r := newReceiver(t, ReceiverConfig{Initial: 1000, Max: 4000}, 1000)
		// Data arrived long ago; the application reads it fast from 1 h on.
		require.Zero(t, r.Consume(1, time.Hour, rtt))
		require.EqualValues(t, 1000+1000, r.Consume(999, time.Hour+time.Millisecond, rtt))
		require.EqualValues(t, 2000, r.Window())
	})

	t.Run("grows all the way to max", func(t *testing.T) {
		const max = 16 << 20
		r := newReceiver(t, ReceiverConfig{Initial: 256 << 10, Max: max}, 0)
		now := time.Duration(0)
		for range 100 {
			w := int(r.Window())
			require.NoError(t, r.Receive(int(r.Outstanding())))
			r.Consume(w, now, rtt)
			require.NoError(t, r.check())
			now += time.Millisecond
		}
		require.EqualValues(t, max, r.Window())
	})

	t.Run("no growth after release", func(t *testing.T) {
		b := unlimited()
		r := newReceiver(t, ReceiverConfig{Initial: 1000, Max: 4000, Budget: b}, 1000)
		r.Release()
		require.EqualValues(t, 1000, r.Consume(1000, 0, rtt))
		require.EqualValues(t, 1000, r.Window())
		require.Zero(t, b.reserves)
		require.NoError(t, r.check())
	})

	t.Run("huge times do not overflow", func(t *testing.T) {
		r := newReceiver(t, ReceiverConfig{Initial: MaxWindow / 2, Max: MaxWindow}, MaxWindow/2)
		require.EqualValues(t, MaxWindow/2+MaxWindow/2, r.Consume(MaxWindow/2, math.MaxInt64, math.MaxInt64))
		require.EqualValues(t, MaxWindow-1, r.Window())
		require.NoError(t, r.check())
		require.NoError(t, r.Receive(int(r.Outstanding())))
		// Clamped to what is buffered; the epoch took no time: the window
		// grows by the single byte left below MaxWindow.
		require.EqualValues(t, MaxWindow, r.Consume(MaxWindow, math.MaxInt64, 1))
		require.EqualValues(t, MaxWindow, r.Window())
		require.NoError(t, r.check())
	})
}

func TestFastEpoch(t *testing.T) {
	for _, tc := range []struct {
		elapsed      time.Duration
		read, window int64
		rtt          time.Duration
		want         bool
	}{
		{0, 1, 1, 1, true},
		{3, 1, 1, 1, true},
		{4, 1, 1, 1, false},
		{19, 501, 1000, 10, true}, // 4 × 0.501 × 10 = 20.04
		{20, 501, 1000, 10, true},
		{21, 501, 1000, 10, false},
		{math.MaxInt64, math.MaxInt64, MaxWindow, math.MaxInt64, true},
		{math.MaxInt64, 1, MaxWindow, math.MaxInt64, false},
		{math.MaxInt64, MaxWindow, 4 * MaxWindow, math.MaxInt64, false},
		{math.MaxInt64 - 1, MaxWindow, 4 * MaxWindow, math.MaxInt64, true},
	} {
		require.Equal(t, tc.want, fastEpoch(tc.elapsed, tc.read, tc.window, tc.rtt), "%+v", tc)
	}
}
