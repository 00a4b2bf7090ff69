package engine

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/wsmux/wsmux/internal/testkit/require"

	"github.com/wsmux/wsmux/frame"
)

// frames decodes a batch into its frames.
func frames(t *testing.T, b []byte) []frame.Frame {
	t.Helper()
	var out []frame.Frame
	var it frame.Iterator
	it.Reset(b, frame.DefaultLimits())
	for it.Next() {
		out = append(out, it.Frame())
	}
	require.NoError(t, it.Err())
	return out
}

// TestCoreWithoutSockets drives the state machine directly with a fake
// clock: messages in, batches out.
func TestCoreWithoutSockets(t *testing.T) {
	cfg := testConfig()
	c := New(cfg, false, nil, 0)
	pre := frames(t, c.appendSettings(nil))
	require.Len(t, pre, 1)
	require.Equal(t, frame.TypeSettings, pre[0].Type)

	// The client's first message: SETTINGS, SYN and DATA with FIN.
	var s frame.Settings
	msg := frame.AppendSettings(nil, &s)
	msg = appendOK(frame.AppendHeadersBlock(msg, 1, frame.FlagSYN, nil))
	msg = appendOK(frame.AppendData(msg, 1, true, []byte("hello")))
	require.NoError(t, c.Feed(msg, time.Second))
	require.Len(t, c.acceptQ, 1)
	st := c.acceptQ[0]
	require.Equal(t, 5, st.rxq.Len())
	require.True(t, st.finRecv)

	// Answer: the ACK.
	out := frames(t, c.appendBatch(nil, time.Second))
	require.Len(t, out, 1)
	require.Equal(t, frame.TypeHeaders, out[0].Type)
	require.Equal(t, frame.FlagACK, out[0].Flags)

	// A PING is answered first thing.
	require.NoError(t, c.Feed(frame.AppendPing(nil, false, 7), 2*time.Second))
	out = frames(t, c.appendBatch(nil, 2*time.Second))
	require.Len(t, out, 1)
	require.Equal(t, frame.TypePing, out[0].Type)
	require.Equal(t, uint32(7), out[0].Arg)

	// Nothing sent for KeepAliveInterval: a PING goes out.
	now := 2*time.Second + cfg.KeepAliveInterval
	require.Equal(t, cfg.KeepAliveInterval, c.NextTimer(2*time.Second))
	c.Tick(now)
	out = frames(t, c.appendBatch(nil, now))
	require.Len(t, out, 1)
	require.Equal(t, frame.TypePing, out[0].Type)
	require.Zero(t, out[0].Flags)

	// Nothing received for KeepAliveTimeout: the session fails.
	c.Tick(2*time.Second + cfg.KeepAliveTimeout)
	require.NotNil(t, c.err)
	require.Equal(t, frame.KeepaliveTimeout, c.err.Code)
	out = frames(t, c.appendBatch(nil, now))
	require.Len(t, out, 1)
	require.Equal(t, frame.TypeGoAway, out[0].Type)
	require.Equal(t, frame.KeepaliveTimeout, out[0].Code())
	require.Equal(t, uint32(1), out[0].StreamID)
}

func TestChunkQueue(t *testing.T) {
	var q chunkQueue
	src := make([]byte, 100<<10)
	for i := range src {
		src[i] = byte(i * 7)
	}
	for _, n := range []int{1, 100, 16 << 10, 16<<10 + 1, 40 << 10} {
		q.write(src[:n])
	}
	total := 1 + 100 + 16<<10 + 16<<10 + 1 + 40<<10
	require.Equal(t, total, q.Len())
	var got []byte
	buf := make([]byte, 5000)
	for q.Len() > 0 {
		n := q.read(buf)
		got = append(got, buf[:n]...)
	}
	var want []byte
	for _, n := range []int{1, 100, 16 << 10, 16<<10 + 1, 40 << 10} {
		want = append(want, src[:n]...)
	}
	require.Equal(t, want, got)
	require.Zero(t, q.cnt, "no chunk held once drained")

	q.write(src[:30000])
	b := q.appendTo(nil, 20000)
	require.Equal(t, src[:20000], b)
	require.Equal(t, 10000, q.Len())
	q.reset()
	require.Zero(t, q.Len())
}

// A graceful Close keeps the HEADERS ACK of a stream it accepted, after the
// GOAWAY: the peer's Open must succeed for a stream whose data is flushed.
// A failing session drops it.
func TestCoreCloseKeepsQueuedAck(t *testing.T) {
	for _, graceful := range []bool{true, false} {
		cfg := testConfig()
		c := New(cfg, false, nil, 0)
		c.appendSettings(nil)
		var s frame.Settings
		msg := frame.AppendSettings(nil, &s)
		msg = appendOK(frame.AppendHeadersBlock(msg, 1, frame.FlagSYN, nil))
		require.NoError(t, c.Feed(msg, time.Second))
		if graceful {
			c.Shutdown(time.Second)
		} else {
			c.fail(frame.ProtocolError, nil)
		}
		out := frames(t, c.appendBatch(nil, time.Second))
		require.Equal(t, frame.TypeGoAway, out[0].Type)
		if graceful {
			require.Len(t, out, 2)
			require.Equal(t, frame.TypeHeaders, out[1].Type)
			require.Equal(t, frame.FlagACK, out[1].Flags)
			require.Equal(t, uint32(1), out[1].StreamID)
		} else {
			require.Len(t, out, 1)
		}
	}
}

// TestCoreSharedWindowCap: a stream alone on the session auto-tunes its
// window past the initial one; once another stream receives DATA within
// shareGap, its window shrinks to the shared cap as it is read; when the
// other stream has been quiet for shareHold, it grows again.
func TestCoreSharedWindowCap(t *testing.T) {
	cfg := testConfig()
	c := New(cfg, false, nil, 0)
	a, b := acceptTwo(t, c)
	c.srtt = 10 * time.Millisecond // a slow path: reading at memory speed is a fast epoch
	c.minRTT = 100 * time.Microsecond
	buf := make([]byte, 1<<20)
	payload := make([]byte, cfg.MaxFramePayload)
	// move sends n bytes on st as fast as its credit allows and reads them.
	move := func(st *Stream, n int, now time.Duration) {
		t.Helper()
		for n > 0 {
			k := min(n, int(st.rx.Outstanding()), len(payload))
			require.Positive(t, k)
			require.NoError(t, c.Feed(appendOK(frame.AppendData(nil, st.id, false, payload[:k])), now))
			require.Nil(t, c.err)
			st.rxq.read(buf[:k])
			c.consumed(st, k, now)
			n -= k
		}
	}
	move(a, 32<<20, 0)
	require.Greater(t, a.rx.Window(), uint32(DefaultInitialStreamWindow), "alone, the window grows")
	require.Zero(t, c.shared.Limit(0, c.minRTT))

	now := 10 * time.Millisecond
	move(b, 10, now) // another stream within shareGap of a's DATA
	require.EqualValues(t, sharedFloor, c.shared.Limit(now, c.minRTT))
	move(a, 32<<20, now)
	require.EqualValues(t, sharedFloor, a.rx.Window(), "shared, the window shrinks to the cap")
	require.LessOrEqual(t, a.rx.Outstanding(), int64(sharedFloor))

	now += shareHold + time.Millisecond
	move(a, 32<<20, now)
	require.Zero(t, c.shared.Limit(now, c.minRTT))
	require.Greater(t, a.rx.Window(), uint32(DefaultInitialStreamWindow), "alone again, it grows again")
}

// TestCoreBulkStreamsNotCapped: streams that all receive full frames are
// not capped however closely they interleave, and a bulk stream's small
// payload (a Write's tail) among its full ones does not count as a
// latency-bound stream's; a small payload on a stream that has had no
// large one for shareGap does. The session window stays capped while
// several streams receive, whatever they are. ReceivingMany tells the driver that several
// streams are receiving, for manyWindow after DATA last changed streams.
func TestCoreBulkStreamsNotCapped(t *testing.T) {
	cfg := testConfig()
	c := New(cfg, false, nil, 0)
	a, b := acceptTwo(t, c)
	c.srtt = 10 * time.Millisecond
	c.minRTT = 100 * time.Microsecond
	buf := make([]byte, 1<<20)
	payload := make([]byte, cfg.MaxFramePayload)
	feed := func(st *Stream, k int, now time.Duration) {
		t.Helper()
		require.NoError(t, c.Feed(appendOK(frame.AppendData(nil, st.id, false, payload[:k])), now))
		require.Nil(t, c.err)
		st.rxq.read(buf[:k])
		c.consumed(st, k, now)
	}
	require.False(t, c.ReceivingMany(0), "no DATA yet")
	now := time.Millisecond
	for range 512 {
		for _, st := range []*Stream{a, b} {
			feed(st, min(len(payload), int(st.rx.Outstanding())), now)
		}
		feed(b, 100, now) // a tail among full frames
		now += 10 * time.Microsecond
	}
	require.Zero(t, c.shared.Limit(now, c.minRTT), "bulk beside bulk: no cap")
	require.Greater(t, a.rx.Window(), uint32(DefaultInitialStreamWindow), "a's window grows")
	require.Greater(t, b.rx.Window(), uint32(DefaultInitialStreamWindow), "b's window grows")
	require.LessOrEqual(t, c.sessRecv.Window(), uint32(max(cfg.InitialSessionWindow, sharedSessionFloor)),
		"several streams receiving: the session window stays capped")
	require.True(t, c.ReceivingMany(now), "two streams receive in turn")
	require.False(t, c.ReceivingMany(now+manyWindow), "no DATA for manyWindow")

	now += shareGap // b has had no large payload since
	feed(b, 100, now)
	feed(a, len(payload), now)
	require.EqualValues(t, sharedFloor, c.shared.Limit(now, c.minRTT), "a latency-bound stream beside bulk: the cap")
}

// A splicing core (a socket that writes vectors) sends the same bytes as a
// copying one: per stream, in order, in batches no larger than the limit,
// whatever the write sizes and however the credit arrives.
func TestCoreSpliceMatchesCopy(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, 9))
		var got [2]map[uint32][]byte
		want := map[uint32][]byte{}
		var cores [2]*Engine
		var sts [2][]*Stream
		sp := new(splice)
		for k := range cores {
			cfg := testConfig()
			if seed%4 == 0 {
				cfg.MaxBatch = 40 << 10 // batches end mid-chunk
			}
			c := New(cfg, true, nil, 0)
			if k == 1 {
				c.splice = sp
			} else {
				c.splice = nil
			}
			var s frame.Settings
			require.NoError(t, c.Feed(frame.AppendSettings(nil, &s), 0))
			_ = c.appendBatch(c.appendSettings(nil), 0)
			for range 4 {
				sts[k] = append(sts[k], c.Open(nil, 0))
			}
			cores[k] = c
			got[k] = map[uint32][]byte{}
		}
		collect := func(k int, b []byte) {
			if k == 1 {
				b = sp.flatten(b)
				sp.release()
			}
			require.LessOrEqual(t, len(b), cores[k].batchLimit())
			if len(b) == 0 {
				return
			}
			for _, f := range frames(t, b) {
				if f.Type == frame.TypeData {
					got[k][f.StreamID] = append(got[k][f.StreamID], f.Payload...)
				}
			}
		}
		now := time.Second
		for step := 0; step < 400; step++ {
			now += time.Millisecond
			switch op := rng.IntN(10); {
			case op < 5: // a Write
				i := rng.IntN(4)
				p := make([]byte, 1+rng.IntN(70000))
				for j := range p {
					p[j] = byte(rng.Uint32())
				}
				for k, c := range cores {
					st := sts[k][i]
					st.txq.write(p)
					c.txQueued += len(p)
					if st.inList == 0 {
						c.link(st)
					}
				}
				want[sts[0][i].id] = append(want[sts[0][i].id], p...)
			case op < 8: // a batch
				for k, c := range cores {
					collect(k, c.appendBatch(nil, now))
				}
			default: // credit: for a stream or for the session
				id := uint32(0)
				if rng.IntN(2) == 0 {
					id = sts[0][rng.IntN(4)].id
				}
				wu, _ := frame.AppendWindowUpdate(nil, id, uint32(1+rng.IntN(300000)))
				for _, c := range cores {
					require.NoError(t, c.Feed(wu, now))
				}
			}
		}
		// Everything left goes out once credit is plentiful.
		for _, c := range cores {
			for _, st := range append([]*Stream{nil}, sts[0]...) {
				id := uint32(0)
				if st != nil {
					id = st.id
				}
				wu, _ := frame.AppendWindowUpdate(nil, id, 1<<30)
				require.NoError(t, c.Feed(wu, now))
			}
		}
		for k, c := range cores {
			for range 10000 {
				b := c.appendBatch(nil, now)
				if len(b) == 0 {
					break
				}
				collect(k, b)
			}
		}
		for id, w := range want {
			require.True(t, bytes.Equal(w, got[0][id]), "seed %d stream %d: copying core", seed, id)
			require.True(t, bytes.Equal(w, got[1][id]), "seed %d stream %d: splicing core", seed, id)
		}
		require.Empty(t, sp.chunks)
	}
}

// spliceTo hands drained chunks over whole and copies the rest.
func TestChunkQueueSplice(t *testing.T) {
	src := make([]byte, 100<<10)
	for i := range src {
		src[i] = byte(i*7 + 3)
	}
	var q chunkQueue
	var sp splice
	q.write(src[:40<<10]) // chunks of 16, 16 and 8 KiB
	b := q.spliceTo([]byte("h1"), 10<<10, &sp)
	require.Len(t, b, 2+10<<10, "a run that leaves its chunk queued is copied")
	require.Empty(t, sp.segs)
	b = q.spliceTo(b, 6<<10+16<<10+1<<10, &sp)
	require.Len(t, sp.segs, 2, "the rest of chunk 1 (6 KiB) and chunk 2 go whole")
	require.Equal(t, 22<<10, sp.n)
	require.Equal(t, 7<<10, q.Len())
	b = q.spliceTo(b, 7<<10, &sp)
	require.Len(t, sp.segs, 3, "the drained last chunk goes whole")
	require.Zero(t, q.Len())
	require.Zero(t, q.cnt)
	flat := sp.flatten(b)
	require.Equal(t, append([]byte("h1"), src[:40<<10]...), flat)
	sp.release()
	require.Zero(t, sp.n)
	require.Empty(t, sp.chunks)

	// Runs shorter than minSplice are copied even when they drain a chunk.
	q.write(src[:minSplice-1])
	b = q.spliceTo(nil, minSplice-1, &sp)
	require.Empty(t, sp.segs)
	require.Equal(t, src[:minSplice-1], b)
}

// testConfig is mux's default configuration, as the engine sees it.
func testConfig() Config {
	return Config{
		MaxFramePayload:      16 << 10,
		MaxHeaderBytes:       8 << 10,
		InitialStreamWindow:  DefaultInitialStreamWindow,
		MaxStreamWindow:      16 << 20,
		InitialSessionWindow: DefaultInitialSessionWindow,
		MaxSessionWindow:     64 << 20,
		MaxStreams:           DefaultMaxStreams,
		AcceptBacklog:        64,
		MaxMessageSize:       DefaultMaxMessageSize,
		KeepAliveInterval:    15 * time.Second,
		KeepAliveTimeout:     45 * time.Second,
		CloseTimeout:         30 * time.Second,
		SettingsTimeout:      5 * time.Second,
		ReadTimeout:          30 * time.Second,
		StallTimeout:         2 * time.Minute,
		StreamSendBuffer:     256 << 10,
		SessionSendBuffer:    4 << 20,
		MaxBatch:             256 << 10,
	}
}

func appendOK(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

func synFrame(dst []byte, id uint32) []byte {
	return appendOK(frame.AppendHeadersBlock(dst, id, frame.FlagSYN, nil))
}

// After CloseRead, the FIN (or reset) that answers its STOP_SENDING does not
// change what Read returns: ErrStreamClosed, as CloseRead promises.
func TestCloseReadThenFin(t *testing.T) {
	for _, answer := range []string{"fin", "reset"} {
		t.Run(answer, func(t *testing.T) {
			c := New(testConfig(), false, nil, 0)
			var s frame.Settings
			msg := frame.AppendSettings(nil, &s)
			msg = synFrame(msg, 1)
			require.NoError(t, c.Feed(msg, time.Second))
			st := c.Accept()
			require.NotNil(t, st)
			c.CloseRead(st, time.Second)
			var in []byte
			if answer == "fin" {
				in = appendOK(frame.AppendData(nil, 1, true, nil))
			} else {
				in = appendOK(frame.AppendRSTStream(nil, 1, frame.Cancel, ""))
			}
			require.NoError(t, c.Feed(in, 2*time.Second))
			_, wait, err := c.Read(st, make([]byte, 10), 2*time.Second)
			require.False(t, wait)
			require.ErrorIs(t, err, ErrStreamClosed)
		})
	}
}

// TestSoleSender: a stream is the sole sender only while it is the one
// stream with DATA ready to send, in whichever class.
func TestSoleSender(t *testing.T) {
	c := New(testConfig(), false, nil, 0)
	a, b := acceptTwo(t, c)
	write := func(st *Stream, n int) {
		t.Helper()
		k, _, err := c.Write(st, make([]byte, n))
		require.NoError(t, err)
		require.Equal(t, n, k)
	}
	require.False(t, c.SoleSender(a), "nothing queued")
	write(a, 100) // the interactive class
	require.True(t, c.SoleSender(a))
	require.False(t, c.SoleSender(b))
	write(b, 64<<10) // the bulk class
	require.False(t, c.SoleSender(a), "b has DATA too")
	require.False(t, c.SoleSender(b), "a has DATA too")
	c.appendBatch(nil, 0)
	require.False(t, c.SoleSender(a), "both were sent")
	require.False(t, c.SoleSender(b), "both were sent")
	write(b, 64<<10)
	write(b, 64<<10)
	require.True(t, c.SoleSender(b), "one stream, however much it queued")

	// A Write waiting for credit on a keeps b from being alone.
	c.appendBatch(nil, 0)
	for i := 0; i < 100 && a.tx.avail() > 0; i++ {
		write(a, min(a.tx.avail(), 64<<10))
		c.appendBatch(nil, 0)
	}
	k, _, err := c.Write(a, make([]byte, 10))
	require.NoError(t, err)
	require.Zero(t, k, "a has no credit left: its Write waits")
	write(b, 100)
	require.False(t, c.SoleSender(b), "a's Write waits for credit")
	c.StopWaiting(a) // it gave up
	require.True(t, c.SoleSender(b))
}

// acceptTwo feeds c (a server engine) the peer's SETTINGS and SYNs for
// streams 1 and 3, and returns the two accepted streams.
func acceptTwo(t *testing.T, c *Engine) (*Stream, *Stream) {
	t.Helper()
	var s frame.Settings
	msg := frame.AppendSettings(nil, &s)
	msg = appendOK(frame.AppendHeadersBlock(msg, 1, frame.FlagSYN, nil))
	msg = appendOK(frame.AppendHeadersBlock(msg, 3, frame.FlagSYN, nil))
	require.NoError(t, c.Feed(msg, 0))
	require.Len(t, c.acceptQ, 2)
	return c.acceptQ[0], c.acceptQ[1]
}

// A queue that never drains (writers waiting in turn for session send-buffer
// room under sustained load, control frames queued as fast as they go out)
// keeps an array the size of what it holds, not of every push since it was
// last empty, and stays first in, first out.
func TestQueuesNeverDrainingStayBounded(t *testing.T) {
	const live, rounds = 3, 20_000
	t.Run("streams", func(t *testing.T) {
		sts := make([]Stream, live+1)
		var q streamQueue
		for i := range live {
			q.push(&sts[i])
		}
		for i := range rounds {
			require.Same(t, &sts[i%(live+1)], q.pop())
			q.push(&sts[(i+live)%(live+1)])
			require.LessOrEqual(t, cap(q.q), 4*live, "round %d", i)
		}
	})
	t.Run("control frames", func(t *testing.T) {
		var q ctrlQueue
		for i := range live {
			q.push(ctrl{id: uint32(i)})
		}
		for i := range rounds {
			require.Equal(t, uint32(i), q.front().id)
			q.pop()
			q.push(ctrl{id: uint32(i + live)})
			require.LessOrEqual(t, cap(q.q), 4*live, "round %d", i)
		}
	})
}
