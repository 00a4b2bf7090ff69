package flow

import (
	"math"
	"testing"
	"time"

	"github.com/wsmux/wsmux/internal/testkit/require"
)

// Tests of Receiver's credit accounting: Init, Receive, the quarter-window
// update rule, Discard, EnsureWindow and Release.

func TestReceiverInit(t *testing.T) {
	for _, tc := range []struct {
		name          string
		cfg           ReceiverConfig
		window, limit int64
	}{
		{"defaults", ReceiverConfig{Initial: 256 << 10, Max: 16 << 20}, 256 << 10, 16 << 20},
		{"max below initial is raised", ReceiverConfig{Initial: 1000, Max: 10}, 1000, 1000},
		{"max equal initial", ReceiverConfig{Initial: 1000, Max: 1000}, 1000, 1000},
		{"zero", ReceiverConfig{}, 0, 0},
		{"initial above max window clamps", ReceiverConfig{Initial: math.MaxUint32, Max: math.MaxUint32}, MaxWindow, MaxWindow},
		{"max above max window clamps", ReceiverConfig{Initial: 1, Max: MaxWindow + 1}, 1, MaxWindow},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r Receiver
			r.Init(tc.cfg)
			require.EqualValues(t, tc.window, r.Window())
			require.Equal(t, tc.window, r.Outstanding())
			require.Zero(t, r.Buffered())
			require.Zero(t, r.Pending())
			require.Equal(t, tc.limit, r.max)
			require.NoError(t, r.check())
		})
	}

	t.Run("zero value rejects data", func(t *testing.T) {
		var r Receiver
		require.ErrorIs(t, r.Receive(1), ErrFlowControl)
		require.NoError(t, r.Receive(0))
		require.Zero(t, r.EnsureWindow(100))
	})

	t.Run("initial window is not reserved", func(t *testing.T) {
		b := unlimited()
		var r Receiver
		r.Init(ReceiverConfig{Initial: 1 << 20, Max: 64 << 20, Budget: b})
		require.Zero(t, b.reserves)
		require.Zero(t, b.used)
	})

	t.Run("reinit releases the previous reservation", func(t *testing.T) {
		b := unlimited()
		var r Receiver
		r.Init(ReceiverConfig{Initial: 100, Max: 1000, Budget: b})
		require.EqualValues(t, 400, r.EnsureWindow(500))
		require.EqualValues(t, 400, b.used)
		r.Init(ReceiverConfig{Initial: 100, Max: 1000, Budget: b})
		require.Zero(t, b.used)
		require.EqualValues(t, 100, r.Window())
		// Growth works again after Init.
		require.EqualValues(t, 100, r.EnsureWindow(200))
		require.EqualValues(t, 100, b.used)
		require.NoError(t, r.check())
	})
}

func TestReceiverReceive(t *testing.T) {
	for _, tc := range []struct {
		name        string
		initial     uint32
		first, n    int
		err         error
		outstanding int64
		buffered    int64
	}{
		{"zero", 100, 0, 0, nil, 100, 0},
		{"negative is zero", 100, 0, -5, nil, 100, 0},
		{"some", 100, 0, 40, nil, 60, 40},
		{"exactly outstanding", 100, 0, 100, nil, 0, 100},
		{"one byte too many", 100, 0, 101, ErrFlowControl, 100, 0},
		{"exactly the rest", 100, 60, 40, nil, 0, 100},
		{"one byte over the rest", 100, 60, 41, ErrFlowControl, 40, 60},
		{"one byte at zero credit", 100, 100, 1, ErrFlowControl, 0, 100},
		{"zero at zero credit", 100, 100, 0, nil, 0, 100},
		{"max window", MaxWindow, 0, MaxWindow, nil, 0, MaxWindow},
		{"above max window", MaxWindow, 0, MaxWindow + 1, ErrFlowControl, MaxWindow, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newReceiver(t, ReceiverConfig{Initial: tc.initial, Max: tc.initial}, tc.first)
			err := r.Receive(tc.n)
			if tc.err == nil {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, tc.err)
			}
			require.Equal(t, tc.outstanding, r.Outstanding())
			require.Equal(t, tc.buffered, r.Buffered())
			require.NoError(t, r.check())
		})
	}
}

// TestReceiverQuarterRule checks the exact boundaries of the rule "an
// update is due once the consumed, unannounced credit reaches a quarter of
// the window".
func TestReceiverQuarterRule(t *testing.T) {
	for _, tc := range []struct {
		name   string
		window uint32
		reads  []int
		deltas []uint32
	}{
		{"just below a quarter", 100, []int{24}, []uint32{0}},
		{"exactly a quarter", 100, []int{25}, []uint32{25}},
		{"accumulates to a quarter", 100, []int{10, 14, 1}, []uint32{0, 0, 25}},
		{"accumulates past a quarter", 100, []int{24, 10}, []uint32{0, 34}},
		{"restarts after an update", 100, []int{25, 24, 1}, []uint32{25, 0, 25}},
		{"uneven window below", 101, []int{25}, []uint32{0}},
		{"uneven window at", 101, []int{25, 1}, []uint32{0, 26}},
		{"window 4 every byte", 4, []int{1, 1, 2}, []uint32{1, 1, 2}},
		{"window 1", 1, []int{1}, []uint32{1}},
		{"whole window at once", 100, []int{100}, []uint32{100}},
		{"zero read", 100, []int{0}, []uint32{0}},
		{"negative read", 100, []int{-7}, []uint32{0}},
		{"read clamped to buffered", 100, []int{1000}, []uint32{100}},
		{"max window", MaxWindow, []int{MaxWindow / 4, 1}, []uint32{0, MaxWindow/4 + 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newReceiver(t, ReceiverConfig{Initial: tc.window, Max: tc.window}, int(tc.window))
			for i, n := range tc.reads {
				require.Equal(t, tc.deltas[i], r.Consume(n, 0, 0), "read %d", i)
				require.NoError(t, r.check())
			}
			require.EqualValues(t, tc.window, r.Window())
		})
	}

	t.Run("nothing buffered", func(t *testing.T) {
		r := newReceiver(t, ReceiverConfig{Initial: 100, Max: 100}, 0)
		require.Zero(t, r.Consume(50, 0, time.Millisecond))
		require.Zero(t, r.Pending())
		require.NoError(t, r.check())
	})

	t.Run("pending is the unannounced credit", func(t *testing.T) {
		r := newReceiver(t, ReceiverConfig{Initial: 100, Max: 100}, 60)
		require.Zero(t, r.Consume(20, 0, 0))
		require.EqualValues(t, 40, r.Outstanding())
		require.EqualValues(t, 40, r.Buffered())
		require.EqualValues(t, 20, r.Pending())
		require.EqualValues(t, 25, r.Consume(5, 0, 0))
		require.EqualValues(t, 65, r.Outstanding())
		require.EqualValues(t, 35, r.Buffered())
		require.Zero(t, r.Pending())
	})
}

func TestReceiverDiscard(t *testing.T) {
	for _, tc := range []struct {
		name     string
		buffered int
		n        int
		delta    uint32
		err      error
	}{
		{"small", 0, 10, 0, nil},
		{"a quarter", 0, 25, 25, nil},
		{"all", 0, 100, 100, nil},
		{"zero", 0, 0, 0, nil},
		{"negative", 0, -1, 0, nil},
		{"one byte too many", 0, 101, 0, ErrFlowControl},
		{"one byte too many with buffered", 50, 51, 0, ErrFlowControl},
		{"the rest with buffered", 50, 50, 50, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newReceiver(t, ReceiverConfig{Initial: 100, Max: 400}, tc.buffered)
			before := *r
			delta, err := r.Discard(tc.n)
			require.Equal(t, tc.delta, delta)
			if tc.err != nil {
				require.ErrorIs(t, err, tc.err)
				require.Equal(t, before, *r)
				return
			}
			require.NoError(t, err)
			require.EqualValues(t, tc.buffered, r.Buffered())
			require.NoError(t, r.check())
		})
	}

	t.Run("adds to pending reads", func(t *testing.T) {
		r := newReceiver(t, ReceiverConfig{Initial: 100, Max: 100}, 20)
		require.Zero(t, r.Consume(20, 0, 0))
		delta, err := r.Discard(5)
		require.NoError(t, err)
		require.EqualValues(t, 25, delta)
	})

	t.Run("never auto-tunes", func(t *testing.T) {
		b := unlimited()
		r := newReceiver(t, ReceiverConfig{Initial: 1000, Max: 4000, Budget: b}, 0)
		for range 10 {
			delta, err := r.Discard(1000)
			require.NoError(t, err)
			require.EqualValues(t, 1000, delta)
		}
		require.EqualValues(t, 1000, r.Window())
		require.Zero(t, b.reserves)
		require.NoError(t, r.check())
	})
}

func TestReceiverEnsureWindow(t *testing.T) {
	for _, tc := range []struct {
		name   string
		max    uint32
		budget *testBudget
		w      uint32
		delta  uint32
	}{
		{"raises", 4000, nil, 2500, 1500},
		{"to exactly max", 4000, nil, 4000, 3000},
		{"capped at max", 4000, nil, 5000, 3000},
		{"already larger", 4000, nil, 500, 0},
		{"equal", 4000, nil, 1000, 0},
		{"one more", 4000, nil, 1001, 1},
		{"max equals initial", 1000, nil, 2000, 0},
		{"above max window clamps", MaxWindow, nil, math.MaxUint32, MaxWindow - 1000},
		{"budget approves", 4000, unlimited(), 2000, 1000},
		{"budget refuses", 4000, &testBudget{limit: math.MaxInt64, refuse: true}, 2000, 0},
		{"budget refuses part", 4000, &testBudget{limit: 999}, 2000, 0},
		{"budget exactly enough", 4000, &testBudget{limit: 1000}, 2000, 1000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := ReceiverConfig{Initial: 1000, Max: tc.max}
			if tc.budget != nil {
				cfg.Budget = tc.budget
			}
			r := newReceiver(t, cfg, 300)
			r.Consume(100, 0, 0) // 100 pending, below a quarter
			delta := r.EnsureWindow(tc.w)
			require.Equal(t, tc.delta, delta)
			require.EqualValues(t, 1000+tc.delta, r.Window())
			require.EqualValues(t, 700+int64(tc.delta), r.Outstanding())
			require.EqualValues(t, 100, r.Pending(), "pending credit is not announced by EnsureWindow")
			require.NoError(t, r.check())
			if tc.budget != nil {
				require.EqualValues(t, tc.delta, tc.budget.used)
			}
		})
	}

	t.Run("after release", func(t *testing.T) {
		b := unlimited()
		r := newReceiver(t, ReceiverConfig{Initial: 1000, Max: 4000, Budget: b}, 0)
		r.Release()
		require.Zero(t, r.EnsureWindow(2000))
		require.Zero(t, b.reserves)
	})
}

func TestReceiverRelease(t *testing.T) {
	b := unlimited()
	r := newReceiver(t, ReceiverConfig{Initial: 1000, Max: 8000, Budget: b}, 1000)
	require.EqualValues(t, 2000, r.Consume(1000, 0, time.Second)) // doubles: +1000
	require.EqualValues(t, 1000, r.EnsureWindow(3000))            // +1000
	require.EqualValues(t, 2000, b.used)
	require.Equal(t, 2, b.reserves)
	r.Release()
	require.Zero(t, b.used)
	require.Equal(t, 1, b.releases)
	r.Release() // idempotent
	require.Zero(t, b.used)
	require.Equal(t, 1, b.releases)
	// Credit accounting still works after Release.
	require.NoError(t, r.Receive(int(r.Outstanding())))
	require.EqualValues(t, 3000, r.Consume(3000, 0, 0))
	require.NoError(t, r.check())

	t.Run("nothing reserved", func(t *testing.T) {
		b := unlimited()
		r := newReceiver(t, ReceiverConfig{Initial: 1000, Max: 8000, Budget: b}, 0)
		r.Release()
		require.Zero(t, b.releases)
	})
	t.Run("nil budget", func(t *testing.T) {
		r := newReceiver(t, ReceiverConfig{Initial: 1000, Max: 8000}, 0)
		require.EqualValues(t, 1000, r.EnsureWindow(2000))
		r.Release()
		r.Release()
	})
}
