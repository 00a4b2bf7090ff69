package flow

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// testBudget is a Budget with a limit that counts its calls.
type testBudget struct {
	limit    int64
	used     int64
	refuse   bool
	reserves int
	releases int
}

func (b *testBudget) Reserve(n int64) bool {
	if n <= 0 {
		panic("Reserve of a non-positive amount")
	}
	b.reserves++
	if b.refuse || n > b.limit-b.used {
		return false
	}
	b.used += n
	return true
}

func (b *testBudget) Release(n int64) {
	if n <= 0 || n > b.used {
		panic("Release of more than reserved")
	}
	b.releases++
	b.used -= n
}

func unlimited() *testBudget { return &testBudget{limit: math.MaxInt64} }

// newReceiver returns an initialised receiver that has received and
// buffered `buffered` bytes.
func newReceiver(t testing.TB, cfg ReceiverConfig, buffered int) *Receiver {
	t.Helper()
	var r Receiver
	r.Init(cfg)
	require.NoError(t, r.Receive(buffered))
	require.NoError(t, r.check())
	return &r
}

func TestErrors(t *testing.T) {
	for _, e := range []Error{ErrFlowControl, ErrOverflow, ErrZeroDelta} {
		require.NotEmpty(t, e.Error())
		var err error = e
		require.ErrorIs(t, err, e)
		var fe Error
		require.True(t, errors.As(err, &fe))
		require.Equal(t, e, fe)
	}
	require.NotEqual(t, ErrFlowControl, ErrOverflow)
	require.NotEqual(t, ErrOverflow, ErrZeroDelta)
	require.EqualValues(t, math.MaxInt32, MaxWindow)
}

func TestSenderInit(t *testing.T) {
	for _, tc := range []struct {
		name    string
		initial uint32
		want    int64
	}{
		{"zero", 0, 0},
		{"one", 1, 1},
		{"stream default", 256 << 10, 256 << 10},
		{"max window", MaxWindow, MaxWindow},
		{"one above max clamps", MaxWindow + 1, MaxWindow},
		{"max uint32 clamps", math.MaxUint32, MaxWindow},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s Sender
			s.Init(tc.initial)
			require.Equal(t, tc.want, s.Available())
		})
	}
	var zero Sender
	require.Zero(t, zero.Available())
	require.False(t, zero.Consume(1))
}

func TestSenderConsume(t *testing.T) {
	for _, tc := range []struct {
		name    string
		initial uint32
		n       int
		ok      bool
		left    int64
	}{
		{"zero", 10, 0, true, 10},
		{"some", 10, 3, true, 7},
		{"exactly available", 10, 10, true, 0},
		{"one above available", 10, 11, false, 10},
		{"negative", 10, -1, false, 10},
		{"nothing available", 0, 1, false, 0},
		{"zero of nothing", 0, 0, true, 0},
		{"all of max window", MaxWindow, MaxWindow, true, 0},
		{"above max window", MaxWindow, MaxWindow + 1, false, MaxWindow},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s Sender
			s.Init(tc.initial)
			require.Equal(t, tc.ok, s.Consume(tc.n))
			require.Equal(t, tc.left, s.Available())
		})
	}
}

func TestSenderGrant(t *testing.T) {
	for _, tc := range []struct {
		name    string
		initial uint32
		consume int
		delta   uint32
		err     error
		want    int64
	}{
		{"zero delta", 10, 0, 0, ErrZeroDelta, 10},
		{"zero delta at zero credit", 10, 10, 0, ErrZeroDelta, 0},
		{"one", 10, 0, 1, nil, 11},
		{"refill", 10, 10, 10, nil, 10},
		{"to exactly max window", 10, 0, MaxWindow - 10, nil, MaxWindow},
		{"one above max window", 10, 0, MaxWindow - 9, ErrOverflow, 10},
		{"max window from zero", 0, 0, MaxWindow, nil, MaxWindow},
		{"2^31 from zero", 0, 0, MaxWindow + 1, ErrOverflow, 0},
		{"max uint32", 0, 0, math.MaxUint32, ErrOverflow, 0},
		{"one at max window", MaxWindow, 0, 1, ErrOverflow, MaxWindow},
		{"one after consuming one at max", MaxWindow, 1, 1, nil, MaxWindow},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s Sender
			s.Init(tc.initial)
			require.True(t, s.Consume(tc.consume))
			err := s.Grant(tc.delta)
			if tc.err == nil {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, tc.err)
			}
			require.Equal(t, tc.want, s.Available())
		})
	}
}

// TestSenderAdjust: a change of the peer's initial window moves the
// credit; a decrease below zero leaves a debt that grants pay first.
func TestSenderAdjust(t *testing.T) {
	for _, tc := range []struct {
		name      string
		initial   uint32
		consume   int
		adjust    int64
		err       error
		avail     int64
		debt      int64
		grant     uint32 // then, if not 0
		wantAfter int64  // credit after the grant
		debtAfter int64
	}{
		{"raise", 100, 0, 50, nil, 150, 0, 10, 160, 0},
		{"lower within credit", 100, 0, -40, nil, 60, 0, 10, 70, 0},
		{"lower below zero owes", 100, 80, -50, nil, 0, 30, 10, 0, 20},
		{"grant pays the debt then adds", 100, 100, -30, nil, 0, 30, 50, 20, 0},
		{"raise pays the debt first", 100, 100, -30, nil, 0, 30, 0, 0, 0},
		{"raise past max window", 10, 0, MaxWindow, ErrOverflow, 10, 0, 0, 10, 0},
		{"raise to max window", 10, 0, MaxWindow - 10, nil, MaxWindow, 0, 0, MaxWindow, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s Sender
			s.Init(tc.initial)
			require.True(t, s.Consume(tc.consume))
			err := s.Adjust(tc.adjust)
			if tc.err == nil {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, tc.err)
			}
			require.Equal(t, tc.avail, s.Available())
			require.Equal(t, tc.debt, s.Debt())
			if tc.name == "raise pays the debt first" {
				require.NoError(t, s.Adjust(40))
				require.Equal(t, int64(10), s.Available())
				require.Zero(t, s.Debt())
				return
			}
			if tc.grant > 0 {
				require.NoError(t, s.Grant(tc.grant))
			}
			require.Equal(t, tc.wantAfter, s.Available())
			require.Equal(t, tc.debtAfter, s.Debt())
		})
	}
	// A grant that would overflow once the debt is paid changes nothing.
	var s Sender
	s.Init(MaxWindow)
	require.NoError(t, s.Adjust(-MaxWindow-5))
	require.Equal(t, int64(5), s.Debt())
	require.NoError(t, s.Grant(MaxWindow))
	require.Equal(t, int64(MaxWindow-5), s.Available())
	require.ErrorIs(t, s.Grant(6), ErrOverflow)
	require.Equal(t, int64(MaxWindow-5), s.Available())
}

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

// TestReceiverRandom drives a receiver and a sender through random honest
// traffic and checks the invariants after every step.
func TestReceiverRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 50 {
		b := &testBudget{limit: rng.Int64N(64 << 20)}
		var r Receiver
		r.Init(ReceiverConfig{Initial: uint32(1 + rng.IntN(1<<20)), Max: uint32(rng.IntN(64 << 20)), Budget: b})
		var s Sender
		s.Init(r.Window())
		var now time.Duration
		rtt := time.Duration(rng.IntN(100)) * time.Millisecond
		for range 2000 {
			switch rng.IntN(5) {
			case 4:
				r.SetLimit(uint32(rng.IntN(int(r.Window())*2 + 1)))
			case 0:
				n := rng.Int64N(s.Available() + 1)
				require.True(t, s.Consume(int(n)))
				require.NoError(t, r.Receive(int(n)))
			case 1:
				if d := r.Consume(rng.IntN(int(r.Buffered())+1), now, rtt); d > 0 {
					require.NoError(t, s.Grant(d))
				}
			case 2:
				if d := r.EnsureWindow(uint32(rng.IntN(int(r.Window())*2 + 1))); d > 0 {
					require.NoError(t, s.Grant(d))
				}
			case 3:
				now += time.Duration(rng.IntN(int(10 * time.Millisecond)))
			}
			require.NoError(t, r.check())
			require.Equal(t, r.Outstanding(), s.Available())
			require.EqualValues(t, max(int64(r.Window())-r.initial, 0), b.used)
		}
		r.Release()
		require.Zero(t, b.used)
	}
}

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

// TestZeroAllocs keeps the promise that the hot path never allocates.
func TestZeroAllocs(t *testing.T) {
	b := unlimited()
	var r Receiver
	r.Init(ReceiverConfig{Initial: 256 << 10, Max: 16 << 20, Budget: b})
	var s Sender
	s.Init(256 << 10)
	var now time.Duration
	allocs := testing.AllocsPerRun(1000, func() {
		n := int(min(s.Available(), 16<<10))
		s.Consume(n)
		if err := r.Receive(n); err != nil {
			t.Fatal(err)
		}
		if d := r.Consume(n, now, time.Millisecond); d > 0 {
			if err := s.Grant(d); err != nil {
				t.Fatal(err)
			}
		}
		if d := r.EnsureWindow(r.Window() + 1); d > 0 {
			_ = s.Grant(d)
		}
		if d, err := r.Discard(0); d != 0 || err != nil {
			t.Fatal(d, err)
		}
		now += time.Microsecond
	})
	require.Zero(t, allocs)
	require.Greater(t, r.Window(), uint32(256<<10), "growth path exercised")
	r.Release()
	require.Zero(t, b.used)
}

func BenchmarkReceiver(b *testing.B) {
	b.Run("consume", func(b *testing.B) {
		var r Receiver
		r.Init(ReceiverConfig{Initial: 256 << 10, Max: 16 << 20})
		var now time.Duration
		b.ReportAllocs()
		for b.Loop() {
			if r.Outstanding() < 16<<10 {
				r.Consume(int(r.Buffered()), now, time.Millisecond)
			}
			_ = r.Receive(16 << 10)
			r.Consume(16<<10, now, time.Millisecond)
			now += time.Microsecond
		}
	})
}

func BenchmarkSender(b *testing.B) {
	b.Run("grant", func(b *testing.B) {
		var s Sender
		s.Init(256 << 10)
		b.ReportAllocs()
		for b.Loop() {
			s.Consume(16 << 10)
			if err := s.Grant(16 << 10); err != nil {
				b.Fatal(err)
			}
		}
	})
}
