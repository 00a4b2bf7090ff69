package flow

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/wsmux/wsmux/internal/testkit/require"
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
