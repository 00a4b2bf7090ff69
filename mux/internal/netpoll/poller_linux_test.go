//go:build linux

package netpoll

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"path/filepath"
	"testing"

	"github.com/wsmux/wsmux/internal/testkit/require"
)

// chanHandler forwards events to a channel that never blocks the loop.
type chanHandler chan Event

func (c chanHandler) OnReady(e Event) Task {
	select {
	case c <- e:
	default:
	}
	return nil
}

func tcpConns(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	ch := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		ch <- c
	}()
	a, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	b := <-ch
	require.NotNil(t, b)
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

func unixConns(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("unix", filepath.Join(t.TempDir(), "s"))
	require.NoError(t, err)
	defer ln.Close()
	ch := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		ch <- c
	}()
	a, err := net.Dial("unix", ln.Addr().String())
	require.NoError(t, err)
	b := <-ch
	require.NotNil(t, b)
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

// readAll reads what r has until ErrWouldBlock, waiting for Readable
// events, until want bytes came or EOF.
func readSome(t *testing.T, r *Registration, ev chanHandler, want int) ([]byte, error) {
	var out []byte
	buf := make([]byte, 7000)
	for len(out) < want {
		n, err := r.Read(buf)
		out = append(out, buf[:n]...)
		switch {
		case errors.Is(err, ErrWouldBlock):
			<-ev
		case err != nil:
			return out, err
		}
	}
	return out, nil
}

// 8 MiB each way through registered sockets, with partial writes parked
// until the Writable event: bytes checksummed on the other side.
func TestPollerReadWrite(t *testing.T) {
	for name, pair := range map[string]func(*testing.T) (net.Conn, net.Conn){"tcp": tcpConns, "unix": unixConns} {
		t.Run(name, func(t *testing.T) {
			p, err := New(NewPool(2))
			require.NoError(t, err)
			defer p.Close()
			a, b := pair(t)
			require.True(t, Supported(b))
			var r Registration
			ev := make(chanHandler, 1)
			require.NoError(t, p.Add(&r, b, ev))
			defer r.Remove()

			data := make([]byte, 8<<20)
			_, _ = rand.Read(data)
			sent := sha256.Sum256(data)
			// Peer to registration: the peer writes, r reads without blocking.
			go func() { _, _ = a.Write(data) }()
			got, err := readSome(t, &r, ev, len(data))
			require.NoError(t, err)
			require.Equal(t, sent, sha256.Sum256(got))

			// Registration to peer: writes park on ErrWouldBlock.
			done := make(chan [32]byte)
			go func() {
				h := sha256.New()
				_, _ = io.CopyN(h, a, int64(len(data)))
				var s [32]byte
				copy(s[:], h.Sum(nil))
				done <- s
			}()
			parked := 0
			for off := 0; off < len(data); {
				n, err := r.Write(data[off:])
				off += n
				if errors.Is(err, ErrWouldBlock) {
					parked++
					for e := range ev {
						if e&Writable != 0 {
							break
						}
					}
					continue
				}
				require.NoError(t, err)
			}
			require.Equal(t, sent, <-done)
			require.Positive(t, parked, "8 MiB fit in the socket buffer: nothing parked")
		})
	}
}

// The peer's end of stream is an event, then io.EOF.
func TestPollerEOF(t *testing.T) {
	p, err := New(NewPool(2))
	require.NoError(t, err)
	defer p.Close()
	a, b := tcpConns(t)
	var r Registration
	ev := make(chanHandler, 1)
	require.NoError(t, p.Add(&r, b, ev))
	defer r.Remove()
	_, err = a.Write([]byte("last words"))
	require.NoError(t, err)
	require.NoError(t, a.Close())
	got, err := readSome(t, &r, ev, 1<<20)
	require.ErrorIs(t, err, io.EOF)
	require.Equal(t, "last words", string(got))
}

// A read or write after the connection was closed fails cleanly, and
// Remove after it does nothing harmful.
func TestPollerClosedConn(t *testing.T) {
	p, err := New(NewPool(2))
	require.NoError(t, err)
	defer p.Close()
	_, b := tcpConns(t)
	var r Registration
	require.NoError(t, p.Add(&r, b, make(chanHandler, 1)))
	require.NoError(t, b.Close())
	_, err = r.Read(make([]byte, 10))
	require.ErrorIs(t, err, net.ErrClosed)
	_, err = r.Write([]byte("x"))
	require.ErrorIs(t, err, net.ErrClosed)
	r.Remove()
	r.Remove()
}

// Only plain TCP and Unix stream sockets are pollable.
func TestPollerSupported(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	require.False(t, Supported(a))
	_, tb := tcpConns(t)
	require.False(t, Supported(tls.Server(tb, &tls.Config{})))
	p, err := New(NewPool(2))
	require.NoError(t, err)
	var r Registration
	require.ErrorIs(t, p.Add(&r, a, make(chanHandler, 1)), ErrUnsupported)
	require.NoError(t, p.Close())
	_, c := tcpConns(t)
	require.ErrorIs(t, p.Add(&r, c, make(chanHandler, 1)), ErrClosed)
}

// Many registrations on one poller: each gets its own bytes.
func TestPollerMany(t *testing.T) {
	p, err := New(NewPool(2))
	require.NoError(t, err)
	defer p.Close()
	const n = 50
	regs := make([]Registration, n)
	evs := make([]chanHandler, n)
	peers := make([]net.Conn, n)
	for i := range regs {
		a, b := tcpConns(t)
		evs[i] = make(chanHandler, 1)
		require.NoError(t, p.Add(&regs[i], b, evs[i]))
		peers[i] = a
	}
	for i := range peers {
		_, err := peers[i].Write([]byte{byte(i), byte(i)})
		require.NoError(t, err)
	}
	for i := range regs {
		got, err := readSome(t, &regs[i], evs[i], 2)
		require.NoError(t, err)
		require.True(t, bytes.Equal([]byte{byte(i), byte(i)}, got))
		regs[i].Remove()
	}
}

// taskHandler returns itself as the Task of each event: its Run reads
// what the socket has and reports it.
type taskHandler struct {
	r   Registration
	got chan []byte
}

func (h *taskHandler) OnReady(Event) Task { return h }

func (h *taskHandler) Run() {
	buf := make([]byte, 64)
	n, _ := h.r.Read(buf)
	if n > 0 {
		h.got <- buf[:n]
	}
}

// The Tasks the Handlers return run: a lone ready socket's on the poller's
// goroutine, those of many sockets ready at once on the Pool. Either way
// each reads its own bytes.
func TestPollerRunsTasks(t *testing.T) {
	for _, n := range []int{1, 20} {
		pool := NewPool(2)
		p, err := New(pool)
		require.NoError(t, err)
		hs := make([]*taskHandler, n)
		peers := make([]net.Conn, n)
		for i := range hs {
			a, b := tcpConns(t)
			hs[i] = &taskHandler{got: make(chan []byte, 4)}
			require.NoError(t, p.Add(&hs[i].r, b, hs[i]))
			peers[i] = a
		}
		for i := range peers {
			_, err := peers[i].Write([]byte{byte(i), 1, 2})
			require.NoError(t, err)
		}
		for i := range hs {
			require.Equal(t, []byte{byte(i), 1, 2}, <-hs[i].got)
			hs[i].r.Remove()
		}
		require.NoError(t, p.Close())
	}
}

// Writev sends its buffers in order; on a full socket it takes what fits
// and says ErrWouldBlock, and the rest goes after the peer read.
func TestPollerWritev(t *testing.T) {
	p, err := New(NewPool(2))
	require.NoError(t, err)
	defer p.Close()
	a, b := tcpConns(t)
	require.NoError(t, b.(*net.TCPConn).SetWriteBuffer(4<<10))
	var r Registration
	ev := make(chanHandler, 4)
	require.NoError(t, p.Add(&r, b, ev))
	defer r.Remove()
	var v [][]byte
	var all []byte
	for i := range 8000 { // more than MaxVec, more than the socket and the peer's buffers hold
		piece := make([]byte, 100+i%50)
		_, _ = rand.Read(piece)
		v = append(v, piece)
		all = append(all, piece...)
	}
	want := sha256.Sum256(all)
	got := make(chan [32]byte, 1)
	read := func() { // the peer reads only once the socket is full
		h := sha256.New()
		_, _ = io.CopyN(h, a, int64(len(all)))
		got <- [32]byte(h.Sum(nil))
	}
	blocked := false
	for len(v) > 0 {
		n, err := r.Writev(v)
		for n > 0 {
			k := min(n, len(v[0]))
			v[0], n = v[0][k:], n-k
			if len(v[0]) == 0 {
				v = v[1:]
			}
		}
		if errors.Is(err, ErrWouldBlock) {
			if !blocked {
				go read()
			}
			blocked = true
			<-ev // writable again
			continue
		}
		require.NoError(t, err)
	}
	require.True(t, blocked, "the socket filled up at least once")
	require.Equal(t, want, <-got)
}
