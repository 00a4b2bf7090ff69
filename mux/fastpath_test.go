package mux

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wsmux/wsmux/internal/testkit/require"

	"github.com/wsmux/wsmux/frame"
)

// The fast paths: DATA copied straight into a waiting Read's buffer
// (Stream.rdBuf), and small Writes that send their own batch while the
// writer goroutine is parked (Session.kick).

// TestDirectReadOrder sends bytes in odd-sized writes, small and large,
// while the reader waits with buffers of varying sizes: every byte arrives,
// in order, whether it went into the waiting buffer or the receive buffer.
func TestDirectReadOrder(t *testing.T) {
	for _, rbuf := range []int{1, 7, 4 << 10, 64 << 10} {
		t.Run("", func(t *testing.T) {
			cs, ss := tcpPair(t, fastPaths(nil), fastPaths(nil))
			a, b := openPair(t, cs, ss)
			data := make([]byte, 3<<20)
			if rbuf == 1 {
				data = data[:64<<10]
			}
			_, _ = rand.Read(data)
			go func() {
				for off, i := 0, 0; off < len(data); i++ {
					k := min([]int{1, 100, 3000, 5000, 40000}[i%5], len(data)-off)
					if _, err := a.Write(data[off : off+k]); err != nil {
						return
					}
					off += k
				}
				_ = a.CloseWrite()
			}()
			got := make([]byte, 0, len(data))
			buf := make([]byte, rbuf)
			for {
				n, err := b.Read(buf)
				got = append(got, buf[:n]...)
				if errors.Is(err, io.EOF) {
					break
				}
				require.NoError(t, err)
			}
			require.Equal(t, sha256.Sum256(data), sha256.Sum256(got))
		})
	}
}

// TestDirectReadConcurrentReaders has two goroutines read one stream at
// once: only one of them lends its buffer, and no byte is lost or doubled.
func TestDirectReadConcurrentReaders(t *testing.T) {
	cs, ss := tcpPair(t, fastPaths(nil), fastPaths(nil))
	a, b := openPair(t, cs, ss)
	const size = 2 << 20
	data := bytes.Repeat([]byte{1}, size)
	go func() {
		_, _ = a.Write(data)
		_ = a.CloseWrite()
	}()
	var wg sync.WaitGroup
	var mu sync.Mutex
	total, sum := 0, 0
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 1500)
			for {
				n, err := b.Read(buf)
				mu.Lock()
				total += n
				for _, c := range buf[:n] {
					sum += int(c)
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	require.Equal(t, size, total)
	require.Equal(t, size, sum)
}

// lendBuffer registers buf as a waiting Read's buffer, as Read does before
// it waits, and returns a function reporting how much was copied into it.
func lendBuffer(st *Stream, buf []byte) func() int {
	s := st.sess
	s.mu.Lock()
	s.e.Lend(&st.rec, buf)
	s.mu.Unlock()
	return func() int {
		s.mu.Lock()
		defer s.mu.Unlock()
		return st.rec.LentBytes()
	}
}

// TestDirectReadDroppedIsCredited: bytes copied into a waiting Read's
// buffer and then dropped (CloseRead, Reset) are credited back like
// buffered bytes: the session receive window is whole again, so the peer
// can keep sending on other streams.
// (The lending is the engine's, whatever the connection: net.Pipe in a
// synctest bubble shows when the bytes have arrived.)
func TestDirectReadDroppedIsCredited(t *testing.T) {
	for _, drop := range []string{"CloseRead", "Reset"} {
		t.Run(drop, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cs, ss := pipePair(t, fastPaths(nil), fastPaths(nil))
				a, b := openPair(t, cs, ss)
				got := lendBuffer(b, make([]byte, 100))
				_, err := a.Write(make([]byte, 1000))
				require.NoError(t, err)
				synctest.Wait() // the DATA arrived
				require.Equal(t, 100, got())
				require.Equal(t, 900, func() int { ss.mu.Lock(); defer ss.mu.Unlock(); return b.rec.Buffered() }())
				if drop == "CloseRead" {
					require.NoError(t, b.CloseRead())
				} else {
					require.NoError(t, b.Reset(0x8))
				}
				ss.mu.Lock()
				require.Zero(t, b.rec.LentBytes())
				require.Zero(t, ss.e.SessionBuffered(), "dropped bytes still count as buffered")
				ss.mu.Unlock()
				// The session window came back: another stream moves more
				// than a whole initial session window.
				a2, b2 := openPair(t, cs, ss)
				go func() {
					_, _ = a2.Write(make([]byte, 2*defaultInitialSessionWindow))
					_ = a2.CloseWrite()
				}()
				n, err := io.Copy(io.Discard, b2)
				require.NoError(t, err)
				require.Equal(t, int64(2*defaultInitialSessionWindow), n)
			})
		})
	}
}

// TestDirectReadReturnedAfterDeadline: a Read whose deadline passes after
// bytes were copied into its buffer, before it could take them (it needs
// ss.mu), returns those bytes, not a timeout. The test makes that order
// itself: with ss.mu held it feeds the DATA (as the reader goroutine
// would) and moves the deadline into the past, and only then lets the
// Read run.
func TestDirectReadReturnedAfterDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cs, ss := pipePair(t, fastPaths(nil), fastPaths(nil))
		for i := range 5 {
			a, b := openPair(t, cs, ss)
			res := make(chan int, 1)
			buf := make([]byte, 64)
			require.NoError(t, b.SetReadDeadline(time.Now().Add(time.Hour)))
			go func() {
				n, _ := b.Read(buf)
				res <- n
			}()
			synctest.Wait() // the Read waits, its buffer lent
			ss.mu.Lock()
			require.True(t, b.rec.Lent())
			data, err := frame.AppendData(nil, b.ID(), false, []byte("hello"))
			require.NoError(t, err)
			require.NoError(t, ss.e.Feed(data, ss.now()))
			require.Equal(t, 5, b.rec.LentBytes())
			b.deadlines().rd.set(time.Now().Add(-time.Second))
			ss.unlock()
			require.Equal(t, 5, <-res, "round %d", i)
			require.Equal(t, "hello", string(buf[:5]))
			require.NoError(t, b.SetReadDeadline(time.Now().Add(-time.Second)))
			_, err = b.Read(buf)
			require.ErrorIs(t, err, ErrTimeout)
			require.NoError(t, b.Reset(0x8))
			require.NoError(t, a.Reset(0x8))
		}
	})
}

// TestSmallWritesManyStreams runs small writes (the direct-write path) on
// many streams at once beside a bulk stream and checks every byte.
func TestSmallWritesManyStreams(t *testing.T) {
	cs, ss := tcpPair(t, fastPaths(nil), fastPaths(nil))
	go echoServer(ss)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		exchange(t, cs, 1, 8<<20) // bulk beside
	}()
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			exchange(t, cs, 15, 300) // one small write each way per stream
		}()
	}
	wg.Wait()
}

// TestDirectWriteFailureEndsSession: when the connection fails under a
// small Write, the session ends with an error, the Write's caller learns
// of it, and no goroutine is left (TestMain checks).
func TestDirectWriteFailureEndsSession(t *testing.T) {
	synctest.Test(t, func(t *testing.T) { directWriteFailureEndsSession(t) })
}

func directWriteFailureEndsSession(t *testing.T) {
	a, b := net.Pipe()
	cs, err := Client(a, fastPaths(nil))
	require.NoError(t, err)
	ss, err := Server(b, fastPaths(nil))
	require.NoError(t, err)
	defer ss.Close()
	defer cs.Close()
	st, peer := openPair(t, cs, ss)
	_, err = st.Write([]byte("x"))
	require.NoError(t, err)
	one := make([]byte, 1)
	_, err = io.ReadFull(peer, one)
	require.NoError(t, err)
	synctest.Wait()
	require.True(t, cs.goroutines().writerParked.Load(), "the writer is parked: a small Write sends its own batch")
	require.NoError(t, b.Close()) // the peer's end goes away
	_, _ = st.Write([]byte("y"))  // its direct write fails (or the writer's, if it woke first)
	<-cs.Done()                   // the session ends
	_, err = st.Write([]byte("y"))
	require.Error(t, err, "the Write's caller learns of it")
	require.Error(t, cs.Err())
}

// parkedConn records, for each Write on the connection, whether the
// session's writer goroutine was parked: if it was, the Write's caller
// wrote the batch itself.
type parkedConn struct {
	net.Conn
	mu     sync.Mutex
	sess   *Session
	parked []bool
}

func (c *parkedConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	if c.sess != nil {
		c.parked = append(c.parked, c.sess.goroutines().writerParked.Load())
	}
	c.mu.Unlock()
	return c.Conn.Write(p)
}

// take returns the recorded writes and starts a new record.
func (c *parkedConn) take() []bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.parked
	c.parked = nil
	return p
}

// TestDirectWriteSizes: with the writer goroutine parked, a Write of any
// size sends its own batch (the writer stays parked through it), unless
// the stream has a write deadline: then only a small one does, and a
// large one is handed to the writer. Every byte arrives either way.
func TestDirectWriteSizes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := net.Pipe()
		pc := &parkedConn{Conn: a}
		cs, ss := sessionsOver(t, pc, b, fastPaths(nil), fastPaths(nil))
		st, peer := openPair(t, cs, ss)
		pc.mu.Lock()
		pc.sess = cs
		pc.mu.Unlock()
		cases := []struct {
			name     string
			size     int
			deadline bool
			direct   bool
		}{
			{"small", 100, false, true},
			{"large", 32 << 10, false, true},
			{"small with deadline", 100, true, true},
			{"large with deadline", 32 << 10, true, false},
		}
		for i, tc := range cases {
			var dl time.Time
			if tc.deadline {
				dl = time.Now().Add(time.Hour)
			}
			require.NoError(t, st.SetWriteDeadline(dl))
			synctest.Wait() // the writer goroutine parks
			pc.take()
			data := bytes.Repeat([]byte{byte(i + 1)}, tc.size)
			done := make(chan error, 1)
			go func() {
				_, err := st.Write(data)
				done <- err
			}()
			got := make([]byte, tc.size)
			_, err := io.ReadFull(peer, got)
			require.NoError(t, err, tc.name)
			require.NoError(t, <-done, tc.name)
			require.Equal(t, data, got, tc.name)
			writes := pc.take()
			require.NotEmpty(t, writes, tc.name)
			require.Equal(t, tc.direct, writes[0], "%s: written by the Write's caller", tc.name)
		}
	})
}
