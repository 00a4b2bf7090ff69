package flow

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
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
			s.Note(step.id, step.at)
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
	zero.Note(1, 0)
	zero.Note(3, 0)
	require.Zero(t, zero.Limit(0, time.Millisecond), "the zero value never caps")
}
