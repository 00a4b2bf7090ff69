package engine

import (
	"bytes"
	"testing"

	"github.com/wsmux/wsmux/internal/testkit/require"

	"github.com/wsmux/wsmux/frame"
)

// lendSetup returns a server engine whose session send buffer holds 64 KiB
// and a streams' 48 KiB, and three accepted streams; the first has filled
// the session's buffer.
func lendSetup(t *testing.T) (*Engine, [3]*Stream) {
	t.Helper()
	return lendSetupAbove(t, -1) // every waiting Write lends
}

func lendSetupAbove(t *testing.T, lendAbove int) (*Engine, [3]*Stream) {
	t.Helper()
	cfg := testConfig()
	cfg.lendAbove = lendAbove
	cfg.SessionSendBuffer = 64 << 10
	cfg.StreamSendBuffer = 48 << 10
	c := New(cfg, false, nil, 0)
	var s frame.Settings
	msg := frame.AppendSettings(nil, &s)
	for _, id := range []uint32{1, 3, 5} {
		msg = synFrame(msg, id)
	}
	require.NoError(t, c.Feed(msg, 0))
	require.Len(t, c.acceptQ, 3)
	sts := [3]*Stream{c.acceptQ[0], c.acceptQ[1], c.acceptQ[2]}
	k, _, err := c.Write(sts[0], pattern(0, 48<<10))
	require.NoError(t, err)
	require.Equal(t, 48<<10, k)
	k, _, err = c.Write(sts[1], pattern(1, 16<<10))
	require.NoError(t, err)
	require.Equal(t, 16<<10, k, "the session's buffer is full now")
	drainEvents(c)
	return c, sts
}

// pattern returns n bytes that tell which Write (i) they came from.
func pattern(i, n int) []byte {
	return bytes.Repeat([]byte{byte('a' + i)}, n)
}

func drainEvents(c *Engine) {
	for st, _ := c.PopStreamEvent(); st != nil; st, _ = c.PopStreamEvent() {
	}
}

// writableEvents returns how many EvWritable each stream got since the last
// call.
func writableEvents(c *Engine) map[*Stream]int {
	m := map[*Stream]int{}
	for st, ev := c.PopStreamEvent(); st != nil; st, ev = c.PopStreamEvent() {
		if ev&EvWritable != 0 {
			m[st]++
		}
	}
	return m
}

// sent lays out a batch (testConfig copies every byte into it: no
// splicing) and returns the DATA payload it carries per stream.
func sent(t *testing.T, c *Engine) map[uint32][]byte {
	t.Helper()
	b := c.appendBatch(nil, 0)
	out := map[uint32][]byte{}
	if len(b) == 0 {
		return out
	}
	for _, f := range frames(t, b) {
		if f.Type == frame.TypeData {
			out[f.StreamID] = append(out[f.StreamID], f.Payload...)
		}
	}
	return out
}

// Writes that wait for the session's send buffer and lent their bytes are
// queued by the engine in the order they began waiting, as batches free
// room, and each is woken once: when all of it is queued.
func TestLentWritesQueuedInTurn(t *testing.T) {
	c, sts := lendSetup(t)
	b, d := sts[1], sts[2]
	pb, pd := pattern(2, 40<<10), pattern(3, 40<<10)
	for _, w := range []struct {
		st *Stream
		p  []byte
	}{{b, pb}, {d, pd}} {
		k, _, err := c.Write(w.st, w.p)
		require.NoError(t, err)
		require.Zero(t, k)
		require.True(t, c.LendWrite(w.st, w.p))
	}
	require.Empty(t, writableEvents(c))

	// The first batch frees 64 KiB: b's 40 KiB are queued, then 24 KiB of
	// d's, which stays first in line.
	got := sent(t, c)
	require.Len(t, got[1], 48<<10)
	require.Len(t, got[3], 16<<10)
	require.Equal(t, map[*Stream]int{b: 1}, writableEvents(c), "b is woken once, d not yet")
	require.Zero(t, c.UnlendWrite(b), "all of b's Write was queued")
	c.StopWaiting(b)

	got = sent(t, c)
	require.Equal(t, pb, got[3], "b's lent bytes, in order")
	require.Equal(t, pd[:24<<10], got[5])
	require.Equal(t, map[*Stream]int{d: 1}, writableEvents(c))
	require.Zero(t, c.UnlendWrite(d))
	c.StopWaiting(d)
	require.Equal(t, pd[24<<10:], sent(t, c)[5])
	require.False(t, c.pending())
}

// A lent Write whose stream's own send buffer fills first waits for that
// instead (roomCame wakes it), and what was not queued stays the Write's.
func TestLentWriteStreamRoomRunsOut(t *testing.T) {
	c, sts := lendSetup(t)
	d := sts[2]
	pd := pattern(3, 56<<10)
	k, _, err := c.Write(d, pd)
	require.NoError(t, err)
	require.Zero(t, k)
	require.True(t, c.LendWrite(d, pd))

	sent(t, c) // frees 64 KiB; d's stream buffer takes 48 KiB of its 56
	require.Empty(t, writableEvents(c), "not woken: its stream's buffer is full")
	require.Equal(t, pd[:48<<10], sent(t, c)[5])
	require.Equal(t, map[*Stream]int{d: 1}, writableEvents(c), "woken once its stream's room came")
	require.Equal(t, 8<<10, c.UnlendWrite(d), "8 KiB are still the Write's")
	c.StopWaiting(d)
	require.False(t, c.pending())
}

// lendOne returns lendSetup's engine and third stream, whose Write of pd
// waits for the session's buffer with pd lent.
func lendOne(t *testing.T) (*Engine, *Stream, []byte) {
	t.Helper()
	c, sts := lendSetup(t)
	d, pd := sts[2], pattern(3, 8<<10)
	k, _, _ := c.Write(d, pd)
	require.Zero(t, k)
	require.True(t, c.LendWrite(d, pd))
	return c, d, pd
}

// A Write that stopped waiting (a deadline, a reset) and took its bytes
// back is not touched again, and a reset stream's lent bytes are not
// queued: its Write is woken to fail.
func TestLentWriteTakenBack(t *testing.T) {
	t.Run("deadline", func(t *testing.T) {
		c, d, pd := lendOne(t)
		require.Equal(t, len(pd), c.UnlendWrite(d))
		c.StopWaiting(d)
		for range 3 {
			require.Empty(t, sent(t, c)[5])
		}
		require.Empty(t, writableEvents(c))
	})
	t.Run("reset", func(t *testing.T) {
		c, d, pd := lendOne(t)
		require.NoError(t, c.Feed(appendOK(frame.AppendRSTStream(nil, 5, frame.Cancel, "")), 0))
		require.Empty(t, sent(t, c)[5])
		require.Positive(t, writableEvents(c)[d], "woken to fail")
		require.Equal(t, len(pd), c.UnlendWrite(d))
		c.StopWaiting(d)
		_, _, err := c.Write(d, pd)
		require.Error(t, err)
	})
	t.Run("not waiting for the session", func(t *testing.T) {
		c, sts := lendSetup(t)
		require.False(t, c.LendWrite(sts[2], pattern(3, 10)), "nothing waits")
	})
}

// Bytes are lent only while more Writes wait than the session's send
// buffer could give 16 KiB each: a 64 KiB buffer, four.
func TestLendOnlyWhenCrowded(t *testing.T) {
	c, sts := lendSetupAbove(t, 0)
	p := pattern(3, 8<<10)
	k, _, _ := c.Write(sts[2], p)
	require.Zero(t, k)
	require.Equal(t, 1, c.writesWaiting)
	require.False(t, c.LendWrite(sts[2], p), "one Write waits")
	c.writesWaiting = 4 // as if three other streams' Writes waited too
	require.False(t, c.LendWrite(sts[2], p), "4 x 16 KiB fit in 64 KiB")
	c.writesWaiting = 5
	require.True(t, c.LendWrite(sts[2], p), "5 x 16 KiB do not")
	require.Equal(t, len(p), c.UnlendWrite(sts[2]))
}
