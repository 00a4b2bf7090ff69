package flow

import (
	"testing"
	"time"

	"github.com/wsmux/wsmux/internal/testkit/require"
)

func TestSharedCap(t *testing.T) {
	s := SharedCap{Gap: 100 * time.Millisecond, Hold: time.Second, Rate: 625e6, Floor: 64 << 10}
	ms := time.Millisecond
	for _, step := range []struct {
		name   string
		id     uint32 // 0: no DATA, only a look
		at     time.Duration
		minRTT time.Duration
		want   uint32
	}{
		{"one stream alone", 1, 0, ms, 0},
		{"the same stream again", 1, 10 * ms, ms, 0},
		{"another stream within Gap", 3, 20 * ms, ms, 625e3},
		{"no RTT measured: no cap", 0, 30 * ms, 0, 0},
		{"a short RTT: the floor", 0, 30 * ms, time.Microsecond, 64 << 10},
		{"a long RTT: capped at MaxWindow", 0, 30 * ms, time.Hour, MaxWindow},
		{"still within Hold", 0, 20*ms + time.Second - 1, ms, 625e3},
		{"Hold over", 0, 20*ms + time.Second, ms, 0},
		{"another stream after Gap: not shared", 1, 2 * time.Second, ms, 0},
	} {
		if step.id != 0 {
			s.Note(step.id, true, step.at)
		}
		require.Equal(t, step.want, s.Limit(step.at, step.minRTT), step.name)
		sess := SessionLimit(s.Limit(step.at, step.minRTT), 4<<20)
		switch {
		case step.want == 0:
			require.Zero(t, sess, "%s: no stream cap, no session cap", step.name)
		case step.want >= MaxWindow/2:
			require.EqualValues(t, MaxWindow, sess, "%s: the session cap stays a window", step.name)
		default:
			require.Equal(t, max(2*step.want, 4<<20), sess, "%s: twice the stream cap, at least the floor", step.name)
		}
	}
	var zero SharedCap
	zero.Note(1, true, 0)
	zero.Note(3, true, 0)
	require.Zero(t, zero.Limit(0, time.Millisecond), "the zero value never caps")
}

// note is one call of SharedCap.Note.
type note struct {
	id    uint32
	small bool
	at    time.Duration
}

// Only a small stream's DATA beside another stream's (in either order)
// starts sharing: bulk streams alone are not capped.
func TestSharedCapSmall(t *testing.T) {
	ms := time.Millisecond
	const bulk, small = false, true
	for _, tc := range []struct {
		name   string
		notes  []note
		shared bool
	}{
		{"two bulk streams", []note{{1, bulk, 0}, {3, bulk, ms}, {1, bulk, 2 * ms}}, false},
		{"a small stream after bulk", []note{{1, bulk, 0}, {3, small, ms}}, true},
		{"bulk after a small stream", []note{{3, small, 0}, {1, bulk, ms}}, true},
		{"bulk after another's small DATA, bulk between", []note{{3, small, 0}, {5, bulk, ms}, {1, bulk, 2 * ms}}, true},
		{"small and bulk on one stream", []note{{1, small, 0}, {1, bulk, ms}, {1, small, 2 * ms}}, false},
		{"a small stream after Gap", []note{{1, bulk, 0}, {3, small, 100 * ms}}, false},
		{"bulk after Gap", []note{{3, small, 0}, {1, bulk, 100 * ms}}, false},
	} {
		s := SharedCap{Gap: 100 * ms, Hold: time.Second, Rate: 625e6, Floor: 64 << 10}
		for _, n := range tc.notes {
			s.Note(n.id, n.small, n.at)
		}
		last := tc.notes[len(tc.notes)-1].at
		require.Equal(t, tc.shared, s.Shared(last), tc.name)
		require.Equal(t, tc.shared, s.Limit(last, ms) != 0, tc.name)
	}
}

// Mixed says whether DATA changed streams within the given span; the
// session window is capped then too (SessionCap); Cap is the cap whether
// streams share or not.
func TestSharedCapMixedAndCap(t *testing.T) {
	ms := time.Millisecond
	s := SharedCap{Gap: 100 * ms, Hold: time.Second, Rate: 625e6, Floor: 64 << 10}
	require.False(t, s.Mixed(0, 10*ms), "no DATA")
	s.Note(1, false, ms)
	s.Note(1, false, 2*ms)
	require.False(t, s.Mixed(2*ms, 10*ms), "one stream")
	s.Note(3, false, 3*ms)
	require.True(t, s.Mixed(3*ms, 10*ms), "another stream")
	require.True(t, s.Mixed(13*ms-1, 10*ms), "within the span")
	require.False(t, s.Mixed(13*ms, 10*ms), "the span passed")
	require.Zero(t, s.Limit(3*ms, ms), "bulk streams: no limit")
	require.EqualValues(t, 625e3, s.SessionCap(3*ms, ms, 10*ms), "bulk streams in turn: the session is capped")
	require.Zero(t, s.SessionCap(13*ms, ms, 10*ms), "one stream again: not")
	require.EqualValues(t, 625e3, s.Cap(ms), "the cap itself")
	require.EqualValues(t, 64<<10, s.Cap(time.Microsecond), "at least the floor")
	require.Zero(t, s.Cap(0), "no RTT: no cap")
}
