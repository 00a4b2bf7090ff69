package mux

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wsmux/wsmux/frame"
)

// FuzzCore feeds arbitrary messages to the session state machine (server
// role) after a valid SETTINGS, interleaved with batches, reads and timer
// ticks. It checks that nothing panics and that a failed session reports a
// *SessionError and sends nothing but its GOAWAY.
//
// Input: a sequence of [op byte][len byte][len bytes]; op%4: 0 feed the
// bytes as a message, 1 lay out a batch, 2 read from every stream, 3 tick.
func FuzzCore(f *testing.F) {
	var s frame.Settings
	set := frame.AppendSettings(nil, &s)
	seed := func(parts ...[]byte) []byte {
		var b []byte
		for _, p := range parts {
			b = append(b, 0, byte(len(p)))
			b = append(b, p...)
			b = append(b, 1, 0)
		}
		return b
	}
	f.Add(seed(synFrame(nil, 1), appendOK(frame.AppendData(nil, 1, true, []byte("hi")))))
	f.Add(seed(frame.AppendPing(nil, false, 1), appendOK(frame.AppendWindowUpdate(nil, 0, 100))))
	f.Add(seed(appendOK(frame.AppendRSTStream(synFrame(nil, 1), 1, frame.Cancel, "x"))))
	f.Add(seed(appendOK(frame.AppendGoAway(nil, 0, frame.NoError, ""))))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 64<<10 {
			return
		}
		watchdog := time.AfterFunc(5*time.Second, func() { panic("FuzzCore: input hangs") })
		defer watchdog.Stop()
		cfg := (*Config)(nil).withDefaults()
		var stats statsCounters
		c := newCore(cfg, false, &stats, 0)
		if err := c.feed(set, 0); err != nil {
			t.Fatal(err)
		}
		now := time.Duration(0)
		buf := make([]byte, 64<<10)
		for len(data) >= 2 {
			op, n := data[0]%4, int(data[1])
			data = data[2:]
			n = min(n, len(data))
			arg := data[:n]
			data = data[n:]
			now += time.Millisecond
			switch op {
			case 0:
				if len(arg) > 0 {
					_ = c.feed(arg, now)
				}
			case 1:
				dead := c.err != nil
				out := c.appendBatch(nil, now)
				if len(out) == 0 {
					break
				}
				var it frame.Iterator
				it.Reset(out, frame.DefaultLimits())
				for it.Next() {
					if typ := it.Frame().Type; dead && typ != frame.TypeGoAway && typ != frame.TypeData {
						t.Fatalf("%v sent after the session failed", typ)
					}
				}
				if it.Err() != nil {
					t.Fatalf("we sent an invalid frame: %v", it.Err())
				}
			case 2:
				for _, st := range c.streams {
					if k := st.rxq.read(buf); k > 0 {
						c.consumed(st, k, now)
					}
				}
			case 3:
				if len(arg) > 0 {
					now += time.Duration(arg[0]) * time.Second
				}
				c.tick(now)
			}
		}
		if c.err != nil && c.err.Code == frame.InternalError {
			t.Fatalf("internal error: %v", c.err)
		}
	})
}

// FuzzSession drives a real server Session over net.Pipe from a raw peer
// that sends SETTINGS and then the fuzz input split into messages
// ([len u8][bytes]...), while the application accepts every stream, reads
// it to the end and writes a reply. Inside a synctest bubble: a deadlock or
// a leaked goroutine fails the run. The session must end with a
// *SessionError or keep running until Close.
func FuzzSession(f *testing.F) {
	msg := func(parts ...[]byte) []byte {
		var b []byte
		for _, p := range parts {
			b = append(b, byte(len(p)))
			b = append(b, p...)
		}
		return b
	}
	f.Add(msg(synFrame(nil, 1), appendOK(frame.AppendData(nil, 1, true, []byte("hi")))))
	f.Add(msg(appendOK(frame.AppendRSTStream(synFrame(nil, 1), 1, frame.Cancel, "")), frame.AppendPing(nil, false, 3)))
	f.Add(msg(synFrame(nil, 1), appendOK(frame.AppendStopSending(nil, 1, 8)), appendOK(frame.AppendGoAway(nil, 0, frame.NoError, ""))))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 16<<10 {
			return
		}
		watchdog := time.AfterFunc(10*time.Second, func() { panic("FuzzSession: input hangs") })
		defer watchdog.Stop()
		synctest.Test(t, func(t *testing.T) {
			a, b := net.Pipe()
			ss, err := Server(b, &Config{CloseTimeout: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			go func() {
				for {
					st, err := ss.AcceptStream(context.Background())
					if err != nil {
						return
					}
					go func() {
						_, _ = io.Copy(io.Discard, st)
						_, _ = st.Write([]byte("reply"))
						_ = st.Close()
					}()
				}
			}()
			peer := newRawPeer(t, a, true)
			go peer.drain()
			var s frame.Settings
			if peer.send(frame.AppendSettings(nil, &s)) == nil {
				for len(data) > 0 {
					n := min(int(data[0]), len(data)-1)
					m := data[1 : 1+n]
					data = data[1+n:]
					if n == 0 {
						continue
					}
					if peer.send(m) != nil {
						break
					}
				}
			}
			time.Sleep(time.Second)
			if err := ss.Err(); err != nil {
				var se *SessionError
				if !errors.As(err, &se) {
					t.Fatalf("session ended with %T %v", err, err)
				}
			}
			_ = ss.Close()
			_ = a.Close()
		})
	})
}
