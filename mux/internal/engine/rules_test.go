package engine

import (
	"testing"
	"time"

	"github.com/wsmux/wsmux/internal/testkit/require"

	"github.com/wsmux/wsmux/frame"
)

// The rules spec revision 2026-12-07 settled (docs/spec/wsmux-v1.md,
// Appendix C), each driven on the engine with a fake clock.

// serverEngine returns a server engine (session start 0) that has its
// peer's SETTINGS.
func serverEngine(t *testing.T, cfg Config) *Engine {
	t.Helper()
	c := New(cfg, false, nil, 0)
	c.appendSettings(nil)
	var s frame.Settings
	require.NoError(t, c.Feed(frame.AppendSettings(nil, &s), 0))
	return c
}

// repeatFrame appends n copies of f.
func repeatFrame(dst []byte, n int, f func([]byte) []byte) []byte {
	for range n {
		dst = f(dst)
	}
	return dst
}

func pingFrame(arg uint32) func([]byte) []byte {
	return func(b []byte) []byte { return frame.AppendPing(b, false, arg) }
}

// requireCalm checks that the session ended with ENHANCE_YOUR_CALM (want)
// or is still running (!want).
func requireCalm(t *testing.T, c *Engine, want bool) {
	t.Helper()
	if !want {
		require.Nil(t, c.err, "the session must survive")
		return
	}
	require.NotNil(t, c.err, "the budget must trip")
	require.Equal(t, frame.EnhanceYourCalm, c.err.Code)
}

// TestPingBucket: the PING budget is a token bucket of 50 that starts full
// at the session's start and refills at 10 a second (spec 11): a burst of
// 50 PINGs in one message is answered, the 51st trips; after 100 ms one
// more token. (The queue of unwritten answers was bounded at 32, so a
// burst of 33 in one message tripped it.)
func TestPingBucket(t *testing.T) {
	for _, tc := range []struct {
		name  string
		burst int
		trip  bool
	}{{"50 at once", 50, false}, {"51 at once", 51, true}} {
		t.Run(tc.name, func(t *testing.T) {
			c := serverEngine(t, testConfig())
			err := c.Feed(repeatFrame(nil, tc.burst, pingFrame(9)), time.Millisecond)
			requireCalm(t, c, tc.trip)
			if tc.trip {
				require.Error(t, err)
				return
			}
			acks := 0
			for _, f := range frames(t, c.appendBatch(nil, time.Millisecond)) {
				if f.Type == frame.TypePing && f.Flags.Has(frame.FlagACK) {
					acks++
				}
			}
			require.Equal(t, tc.burst, acks, "every PING of the burst is answered")
		})
	}
	t.Run("refill", func(t *testing.T) {
		c := serverEngine(t, testConfig())
		require.NoError(t, c.Feed(repeatFrame(nil, 50, pingFrame(1)), 0))
		c.appendBatch(nil, 0)
		require.NoError(t, c.Feed(repeatFrame(nil, 1, pingFrame(2)), 100*time.Millisecond), "one token 100 ms later")
		c.appendBatch(nil, 100*time.Millisecond)
		require.Error(t, c.Feed(repeatFrame(nil, 1, pingFrame(3)), 150*time.Millisecond), "half a token is none")
		requireCalm(t, c, true)
	})
}

// TestCountingBudgetWindows: the counting budgets use windows of 10 s, the
// first from the session's start, each later one from the first counted
// event 10 s or more after the current one began; the Nth event of a
// budget of N is allowed, the N+1th trips.
func TestCountingBudgetWindows(t *testing.T) {
	useless := func(n int) []byte {
		return repeatFrame(nil, n, func(b []byte) []byte { return frame.AppendPing(b, true, 0xabc) })
	}
	t.Run("N in one window", func(t *testing.T) {
		c := serverEngine(t, testConfig())
		require.NoError(t, c.Feed(useless(maxUseless), 9*time.Second))
		requireCalm(t, c, false)
		_ = c.Feed(useless(1), 9*time.Second+999*time.Millisecond)
		requireCalm(t, c, true)
	})
	t.Run("the window began at the session's start", func(t *testing.T) {
		c := serverEngine(t, testConfig())
		require.NoError(t, c.Feed(useless(maxUseless), 9*time.Second))
		require.NoError(t, c.Feed(useless(maxUseless), 10*time.Second), "a new window at 10 s")
		requireCalm(t, c, false)
		_ = c.Feed(useless(1), 19*time.Second+999*time.Millisecond) // the second window began at 10 s
		requireCalm(t, c, true)
	})
}

// TestUselessFrameKinds: every frame that changes nothing counts toward the
// useless-frame budget (spec 11): 1000 are allowed in a window, the 1001st
// trips. HEADERS after the peer's FIN, MAX_STREAMS that does not raise the
// credit and a repeated GOAWAY that lowers nothing used to go uncounted.
func TestUselessFrameKinds(t *testing.T) {
	syn := func(b []byte) []byte { return synFrame(b, 1) }
	synFin := func(b []byte) []byte {
		return appendOK(frame.AppendHeadersBlock(b, 1, frame.FlagSYN|frame.FlagFIN, nil))
	}
	for _, tc := range []struct {
		name  string
		first func([]byte) []byte // what comes before, in the same message
		extra int                 // frames of f that are not useless
		f     func([]byte) []byte
	}{
		{"unsolicited PING ACK", nil, 0, func(b []byte) []byte { return frame.AppendPing(b, true, 0xabc) }},
		{"HEADERS metadata", syn, 0, func(b []byte) []byte { return appendOK(frame.AppendHeadersBlock(b, 1, 0, nil)) }},
		{"HEADERS after the peer's FIN", synFin, 0, func(b []byte) []byte { return appendOK(frame.AppendHeadersBlock(b, 1, 0, nil)) }},
		{"HEADERS with FIN after the peer's FIN", synFin, 0, func(b []byte) []byte { return appendOK(frame.AppendHeadersBlock(b, 1, frame.FlagFIN, nil)) }},
		{"MAX_STREAMS not above the credit", nil, 0, func(b []byte) []byte { return appendOK(frame.AppendMaxStreams(b, 1)) }},
		{"GOAWAY that lowers nothing", syn, 1, func(b []byte) []byte { return appendOK(frame.AppendGoAway(b, 0, frame.NoError, "")) }},
		{"WINDOW_UPDATE on a closed stream", func(b []byte) []byte {
			return appendOK(frame.AppendRSTStream(b, 2, frame.Cancel, "")) // our stream 2, opened below
		}, 0, func(b []byte) []byte { return appendOK(frame.AppendWindowUpdate(b, 2, 1)) }},
	} {
		for _, n := range []int{maxUseless, maxUseless + 1} {
			t.Run(tc.name, func(t *testing.T) {
				c := serverEngine(t, testConfig())
				c.Open(nil, 0) // stream 2
				var msg []byte
				if tc.first != nil {
					msg = tc.first(msg)
				}
				msg = repeatFrame(msg, n+tc.extra, tc.f)
				_ = c.Feed(msg, time.Millisecond)
				requireCalm(t, c, n > maxUseless)
			})
		}
	}
}

// maxStreamsIn returns the credit of the last MAX_STREAMS in b, or 0.
func maxStreamsIn(t *testing.T, b []byte) uint32 {
	t.Helper()
	var credit uint32
	if len(b) == 0 {
		return 0
	}
	for _, f := range frames(t, b) {
		if f.Type == frame.TypeMaxStreams {
			credit = f.Arg
		}
	}
	return credit
}

// TestDoneWithStream: a receiver is done with a peer stream once its
// application took it (accept returned it, or a handler returned) or it
// refused it; a stream reset before the application took it never reaches
// the application and is done at once (spec 7.3). Reset streams used to
// wait in the accept queue (or for a handler, which then ran on a dead
// stream) and held their slots until taken.
func TestDoneWithStream(t *testing.T) {
	rst := func(b []byte, id uint32) []byte { return appendOK(frame.AppendRSTStream(b, id, frame.Cancel, "")) }
	credit := uint32(testConfig().MaxStreams)
	for _, handler := range []bool{false, true} {
		name := "accept"
		if handler {
			name = "handler"
		}
		t.Run(name+": reset before taken", func(t *testing.T) {
			cfg := testConfig()
			cfg.Handler = handler
			c := serverEngine(t, cfg)
			require.NoError(t, c.Feed(rst(synFrame(nil, 1), 1), time.Second))
			require.Empty(t, c.acceptQ, "a reset stream never reaches the application")
			require.Zero(t, c.HandlersWaiting())
			require.Nil(t, c.Accept())
			require.Nil(t, c.TakeHandler())
			out := c.appendBatch(nil, time.Second)
			require.Equal(t, credit+1, maxStreamsIn(t, out), "its slot is back at once")
			for _, f := range frames(t, out) {
				require.NotEqual(t, frame.TypeHeaders, f.Type, "no ACK for a stream reset before the answer")
			}
		})
		t.Run(name+": stream error before taken", func(t *testing.T) {
			cfg := testConfig()
			cfg.Handler = handler
			c := serverEngine(t, cfg)
			msg := appendOK(frame.AppendHeadersBlock(nil, 1, frame.FlagSYN|frame.FlagFIN, nil))
			msg = appendOK(frame.AppendData(msg, 1, false, []byte("late")))
			require.NoError(t, c.Feed(msg, time.Second))
			require.Empty(t, c.acceptQ)
			require.Zero(t, c.HandlersWaiting())
			require.Equal(t, credit+1, maxStreamsIn(t, c.appendBatch(nil, time.Second)))
		})
	}
	t.Run("handler: a reset while the handler runs waits for its return", func(t *testing.T) {
		cfg := testConfig()
		cfg.Handler = true
		c := serverEngine(t, cfg)
		require.NoError(t, c.Feed(synFrame(nil, 1), time.Second))
		st := c.TakeHandler()
		require.NotNil(t, st)
		require.NoError(t, c.Feed(rst(nil, 1), time.Second))
		require.Zero(t, maxStreamsIn(t, c.appendBatch(nil, time.Second)), "the handler still holds the stream")
		c.HandlerDone(st, nil, time.Second)
		require.Equal(t, credit+1, maxStreamsIn(t, c.appendBatch(nil, time.Second)))
	})
	t.Run("accept: taken, then ended both ways", func(t *testing.T) {
		c := serverEngine(t, testConfig())
		require.NoError(t, c.Feed(appendOK(frame.AppendHeadersBlock(nil, 1, frame.FlagSYN|frame.FlagFIN, nil)), time.Second))
		st := c.Accept()
		require.NotNil(t, st)
		require.Zero(t, maxStreamsIn(t, c.appendBatch(nil, time.Second)), "our direction is still open")
		c.CloseWrite(st)
		c.appendBatch(nil, time.Second) // our FIN
		require.Equal(t, credit+1, maxStreamsIn(t, c.appendBatch(nil, time.Second)), "taken and ended both ways: the slot is back, whatever the application still holds")
	})
}

// dataFrames appends n bytes of DATA on stream id in frames of at most
// 16 KiB, the last with fin.
func dataFrames(dst []byte, id uint32, n int, fin bool) []byte {
	for n > 0 || fin {
		k := min(n, 16<<10)
		n -= k
		dst = appendOK(frame.AppendData(dst, id, fin && n == 0, make([]byte, k)))
		if n == 0 {
			break
		}
	}
	return dst
}

// TestDataChecksOrder: DATA is checked for an idle stream first
// (PROTOCOL_ERROR), then against the session window and the stream's
// (FLOW_CONTROL_ERROR), and only then for a FIN before it (the stream error
// STREAM_CLOSED): spec 7.5, 7.8, 8.3. DATA after FIN beyond the stream
// window used to be a mere stream error.
func TestDataChecksOrder(t *testing.T) {
	win := DefaultInitialStreamWindow
	for _, tc := range []struct {
		name string
		msg  func() []byte
		code frame.ErrorCode // 0: the session survives
		rst  frame.ErrorCode // the RST_STREAM expected on stream 1, if any
	}{
		{"after FIN, within the window", func() []byte {
			return dataFrames(dataFrames(synFrame(nil, 1), 1, 100, true), 1, 10, false)
		}, 0, frame.StreamClosed},
		{"after FIN, beyond the stream window", func() []byte {
			return dataFrames(dataFrames(synFrame(nil, 1), 1, win, true), 1, 1, false)
		}, frame.FlowControlError, 0},
		{"idle, beyond the session window", func() []byte {
			var b []byte
			for id := uint32(1); id <= 7; id += 2 {
				b = dataFrames(synFrame(b, id), id, DefaultInitialSessionWindow/4, false)
			}
			return dataFrames(b, 99, 1, false)
		}, frame.ProtocolError, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := serverEngine(t, testConfig())
			_ = c.Feed(tc.msg(), time.Second)
			if tc.code != 0 {
				require.NotNil(t, c.err)
				require.Equal(t, tc.code, c.err.Code)
				return
			}
			require.Nil(t, c.err)
			var rst frame.ErrorCode
			for _, f := range frames(t, c.appendBatch(nil, time.Second)) {
				if f.Type == frame.TypeRSTStream && f.StreamID == 1 {
					rst = f.Code()
				}
			}
			require.Equal(t, tc.rst, rst)
		})
	}
}

// TestResetStreamCredit: once a RST_STREAM was sent or received, DATA for
// the stream counts against and is credited back to the session window
// alone, by session WINDOW_UPDATEs; the stream's window is not checked and
// no WINDOW_UPDATE names the stream (spec 8.4). A reset stream that a
// running handler still held used to check the stream window (and fail
// the session beyond it).
func TestResetStreamCredit(t *testing.T) {
	cfg := testConfig()
	cfg.Handler = true
	c := serverEngine(t, cfg)
	require.NoError(t, c.Feed(synFrame(nil, 1), time.Second))
	st := c.TakeHandler() // the handler runs: the stream stays in the table
	require.NotNil(t, st)
	require.NoError(t, c.Feed(appendOK(frame.AppendRSTStream(nil, 1, frame.Cancel, "")), time.Second))
	c.appendBatch(nil, time.Second)
	n := DefaultInitialSessionWindow / 2 // twice the stream window; two quarters of the session's, so both are due
	require.NoError(t, c.Feed(dataFrames(nil, 1, n, false), 2*time.Second))
	var sess uint32
	for _, f := range frames(t, c.appendBatch(nil, 2*time.Second)) {
		require.False(t, f.Type == frame.TypeWindowUpdate && f.StreamID != 0, "a WINDOW_UPDATE names the reset stream")
		if f.Type == frame.TypeWindowUpdate {
			sess += f.Arg
		}
	}
	require.EqualValues(t, n, sess, "every byte back to the session window")
	c.HandlerDone(st, nil, 2*time.Second)
}

// batchTypes lays out a batch and returns its frames' types.
func batchTypes(t *testing.T, c *Engine, now time.Duration) []frame.Type {
	t.Helper()
	b := c.appendBatch(nil, now)
	if len(b) == 0 {
		return nil
	}
	var out []frame.Type
	for _, f := range frames(t, b) {
		out = append(out, f.Type)
	}
	return out
}

// TestGoAwayRules: only a GOAWAY with NO_ERROR drains (spec 9.4): with any
// other code the session ends at once, streams below the last-stream-id
// included, and we send nothing more; streams above a drain's
// last-stream-id end here with REFUSED_STREAM and no RST_STREAM; the end of
// a drain sends no GOAWAY of its own. An error GOAWAY used to start a drain
// like NO_ERROR's, so a peer that did not close at once left our streams
// running.
func TestGoAwayRules(t *testing.T) {
	goaway := func(last uint32, code frame.ErrorCode) []byte {
		return appendOK(frame.AppendGoAway(nil, last, code, "bye"))
	}
	for _, code := range []frame.ErrorCode{frame.InternalError, frame.IdleTimeout, frame.EnhanceYourCalm, 0x1000} {
		t.Run("ends at once: "+code.String(), func(t *testing.T) {
			c := serverEngine(t, testConfig())
			st := c.Open(nil, 0) // stream 2, at the last-stream-id
			c.appendBatch(nil, 0)
			err := c.Feed(goaway(2, code), time.Second)
			require.Error(t, err)
			require.NotNil(t, c.err)
			require.Equal(t, code, c.err.Code)
			require.True(t, c.err.Remote)
			require.ErrorIs(t, c.WriteErr(st), ErrSessionClosed, "the stream ended with the session")
			_, wait, rerr := c.Read(st, make([]byte, 8), time.Second)
			require.False(t, wait)
			require.ErrorIs(t, rerr, ErrSessionClosed)
			require.Empty(t, batchTypes(t, c, time.Second), "nothing is sent after the peer's error GOAWAY")
		})
	}
	t.Run("drain: above the last-stream-id ends here", func(t *testing.T) {
		c := serverEngine(t, testConfig())
		a, b := c.Open(nil, 0), c.Open(nil, 0) // streams 2 and 4
		c.appendBatch(nil, 0)
		require.NoError(t, c.Feed(goaway(2, frame.NoError), time.Second))
		require.Nil(t, c.err, "a drain")
		require.Nil(t, a.ResetErr(), "stream 2 goes on")
		require.NotNil(t, b.ResetErr())
		require.Equal(t, frame.RefusedStream, b.ResetErr().Code)
		require.NotContains(t, batchTypes(t, c, time.Second), frame.TypeRSTStream, "no RST_STREAM for a stream the peer did not process")
		// Stream 2 ends both ways: the drain ends, with no GOAWAY of ours.
		require.NoError(t, c.Feed(appendOK(frame.AppendData(nil, 2, true, nil)), time.Second))
		c.CloseWrite(a)
		require.NotContains(t, batchTypes(t, c, 2*time.Second), frame.TypeGoAway)
		require.NotNil(t, c.err, "drained")
		require.Equal(t, frame.NoError, c.err.Code)
		require.Empty(t, batchTypes(t, c, 2*time.Second))
	})
}

// TestPingBeforeOurSettings: the peer's SETTINGS and a PING may arrive
// before we sent our SETTINGS (spec 6.1); the PING is answered after them,
// never before: the first frame we send is SETTINGS.
func TestPingBeforeOurSettings(t *testing.T) {
	for _, client := range []bool{false, true} {
		c := New(testConfig(), client, nil, 0)
		var s frame.Settings
		require.NoError(t, c.Feed(frame.AppendPing(frame.AppendSettings(nil, &s), false, 42), 0))
		out := frames(t, c.appendBatch(c.appendPreface(nil, 0), 0)) // as the drivers lay out their first batch
		require.Equal(t, frame.TypeSettings, out[0].Type)
		acked := false
		for _, f := range out[1:] {
			require.NotEqual(t, frame.TypeSettings, f.Type)
			acked = acked || f.Type == frame.TypePing && f.Flags.Has(frame.FlagACK) && f.Arg == 42
		}
		require.True(t, acked, "the PING is answered in the first batch, after SETTINGS")
	}
}
