package mux

import (
	"io"
	"testing"

	"github.com/wsmux/wsmux/internal/testkit/require"
)

// The reference driver uses none of the fast paths, over a connection
// that would allow them all; the fast-paths driver uses all three.
func TestDriverSelectsFastPaths(t *testing.T) {
	for _, tc := range []struct {
		driver Driver
		fast   bool
	}{
		{DriverGoroutines, false},
		{DriverFastPaths, true},
	} {
		t.Run(tc.driver.String(), func(t *testing.T) {
			cfg := &Config{Driver: tc.driver}
			cs, ss := tcpPair(t, cfg, cfg)
			go echoServer(ss)
			st, err := cs.OpenEarly(nil)
			require.NoError(t, err)
			buf := make([]byte, 100)
			for range 50 {
				_, err := st.Write(buf)
				require.NoError(t, err)
				_, err = io.ReadFull(st, buf)
				require.NoError(t, err)
			}
			require.Equal(t, tc.fast, cs.leaderReads())
			require.Equal(t, tc.fast, cs.writesDirect())
			require.Equal(t, tc.fast, cs.e.Splicing())
			if !tc.fast {
				require.Zero(t, cs.Stats().LeaderMessages, "no Read leads")
			}
		})
	}
}

func TestDriverValidate(t *testing.T) {
	require.NoError(t, (&Config{Driver: DriverGoroutines}).Validate())
	require.ErrorContains(t, (&Config{Driver: 9}).Validate(), "unknown Driver")
	require.Equal(t, "unknown", Driver(9).String())
	require.Equal(t, DriverFastPaths, DriverFastPaths.resolve())
}

// A Read whose buffer has room beyond its length (a LimitReader's last
// Read, p[:n] of a larger buffer) returns at most len(p) bytes, on every
// driver, though DATA goes straight into a waiting Read's buffer.
func TestReadNeverPastLen(t *testing.T) {
	for _, d := range []Driver{DriverGoroutines, DriverFastPaths} {
		t.Run(d.String(), func(t *testing.T) {
			cfg := &Config{Driver: d}
			cs, ss := tcpPair(t, cfg, cfg)
			a, b := openPair(t, cs, ss)
			data := make([]byte, 64<<10)
			for i := range data {
				data[i] = byte(i * 7)
			}
			go func() {
				for range 16 {
					if _, err := a.Write(data); err != nil {
						return
					}
				}
				_ = a.CloseWrite()
			}()
			buf := make([]byte, 4096)
			var got []byte
			for {
				n, err := b.Read(buf[:10]) // cap 4096, len 10
				require.LessOrEqual(t, n, 10)
				got = append(got, buf[:n]...)
				if err == io.EOF {
					break
				}
				require.NoError(t, err)
			}
			require.Len(t, got, 16*len(data))
			for i := range 16 {
				require.Equal(t, data, got[i*len(data):(i+1)*len(data)])
			}
		})
	}
}

// GoAwayReceived closes when the peer's GOAWAY arrives, while the streams
// it named go on.
func TestGoAwayReceived(t *testing.T) {
	for _, d := range []Driver{DriverGoroutines, DriverFastPaths} {
		t.Run(d.String(), func(t *testing.T) {
			cfg := &Config{Driver: d}
			cs, ss := tcpPair(t, cfg, cfg)
			a, b := openPair(t, cs, ss)
			select {
			case <-cs.GoAwayReceived():
				t.Fatal("closed before any GOAWAY")
			default:
			}
			require.NoError(t, ss.GoAway(0))
			<-cs.GoAwayReceived()
			_, err := cs.OpenEarly(nil)
			require.ErrorIs(t, err, ErrGoAway)
			// The running stream still works both ways.
			_, err = a.Write([]byte("ping"))
			require.NoError(t, err)
			buf := make([]byte, 4)
			_, err = io.ReadFull(b, buf)
			require.NoError(t, err)
			require.Equal(t, "ping", string(buf))
		})
	}
}

// The driver a session runs on, for tests that look inside it: nil when
// it runs on another.
func (s *Session) onLoop() *evConn        { c, _ := s.drv.(*evConn); return c }
func (s *Session) fastPaths() *fastDriver { d, _ := s.drv.(*fastDriver); return d }

// goroutines returns the goroutine driver under DriverGoroutines and
// DriverFastPaths.
func (s *Session) goroutines() *goDriver {
	switch d := s.drv.(type) {
	case *goDriver:
		return d
	case *fastDriver:
		return &d.goDriver
	}
	return nil
}

// leaderReads reports whether the session's Reads may read the socket.
func (s *Session) leaderReads() bool { d := s.fastPaths(); return d != nil && d.leadOK }

// writesDirect reports whether a Write may write its own batch.
func (s *Session) writesDirect() bool { return s.fastPaths() != nil }
