package flow

import (
	"math"
	"testing"

	"github.com/wsmux/wsmux/internal/testkit/require"
)

// Tests of Sender: Init, Consume, Grant and Adjust.

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
