package wsio

import (
	"bytes"
	"crypto/tls"
	"io"
	"math/rand/v2"
	"net"
	"testing"

	"github.com/wsmux/wsmux/internal/testkit/require"
)

// segmentCase lays out a message as a buffer with segments spliced in and
// returns the buffer, the segments and the payload the peer must receive.
func segmentCase(rng *rand.Rand, nseg int) ([]byte, []Segment, []byte) {
	buf := make([]byte, HeaderRoom, HeaderRoom+4096)
	var segs []Segment
	var want []byte
	for i := 0; i < nseg; i++ {
		head := pattern(rng.IntN(1000), rng.IntN(40)) // a frame header, say; may be empty
		buf = append(buf, head...)
		want = append(want, head...)
		data := pattern(rng.IntN(1000), rng.IntN(20000)) // may be empty too
		segs = append(segs, Segment{At: len(buf), Data: data})
		want = append(want, data...)
	}
	tail := pattern(7, rng.IntN(30))
	buf = append(buf, tail...)
	want = append(want, tail...)
	return buf, segs, want
}

// WriteMessageSegments sends exactly the pieces in order, masked on a
// client, over a socket that takes vectors and over one that does not.
func TestWriteMessageSegments(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, transport := range []string{"tcp", "pipe"} {
		for _, client := range []bool{true, false} {
			t.Run(transport+"/"+roleName(client)+"-writes", func(t *testing.T) {
				a, b := connPair(t, transport)
				defer a.Close()
				defer b.Close()
				require.Equal(t, transport == "tcp", Vectored(a))
				w := New(a, nil, client, 1<<20)
				r := New(b, nil, !client, 1<<20)
				const messages = 300
				wants := make(chan []byte, messages)
				errc := make(chan error, 1)
				go func() {
					for i := 0; i < messages; i++ {
						buf, segs, want := segmentCase(rng, i%9)
						wants <- want
						if err := w.WriteMessageSegments(buf, segs); err != nil {
							errc <- err
							return
						}
					}
					errc <- nil
				}()
				for i := 0; i < messages; i++ {
					msg, err := r.ReadMessage()
					require.NoError(t, err)
					require.True(t, bytes.Equal(<-wants, msg), "message %d", i)
				}
				require.NoError(t, <-errc)
				require.Equal(t, w.BytesWritten(), r.BytesRead())
			})
		}
	}
}

// A server's segments go out unchanged; a client's are masked in place and
// the buffer outside [0, len) is not touched either way.
func TestWriteMessageSegmentsMemory(t *testing.T) {
	for _, client := range []bool{true, false} {
		t.Run(roleName(client), func(t *testing.T) {
			lc := &loopConn{}
			w := New(lc, nil, client, 0)
			data := pattern(1, 5000)
			seg := bytes.Clone(data)
			buf := append(make([]byte, HeaderRoom), "abc"...)
			full := append(buf, "guard"...)
			buf = full[:len(buf)]
			require.NoError(t, w.WriteMessageSegments(buf, []Segment{{At: len(buf), Data: seg}}))
			require.Equal(t, "guard", string(full[len(buf):]))
			require.Equal(t, !client, bytes.Equal(data, seg), "masked in place only on a client")
			r := New(lc, nil, !client, 0)
			msg, err := r.ReadMessage()
			require.NoError(t, err)
			require.Equal(t, append([]byte("abc"), data...), msg)
		})
	}
}

func TestWriteMessageSegmentsErrors(t *testing.T) {
	seg := []Segment{{At: HeaderRoom, Data: []byte("x")}}
	w := New(&failConn{}, nil, true, 0)
	require.ErrorIs(t, w.WriteMessageSegments(make([]byte, 3), seg), io.ErrShortBuffer)
	err := w.WriteMessageSegments(make([]byte, HeaderRoom), seg)
	require.ErrorIs(t, err, errBroken)
	require.ErrorIs(t, w.WriteMessageSegments(make([]byte, HeaderRoom), seg), errBroken, "sticky")

	c := New(&loopConn{}, nil, false, 0)
	require.NoError(t, c.WriteClose(1000, ""))
	require.ErrorIs(t, c.WriteMessageSegments(make([]byte, HeaderRoom), seg), ErrCloseSent)
}

// Over TCP the vectored write allocates nothing in steady state.
func TestWriteMessageSegmentsZeroAllocs(t *testing.T) {
	a, b := connPair(t, "tcp")
	defer a.Close()
	defer b.Close()
	_, ok := a.(*net.TCPConn)
	require.True(t, ok)
	w := New(a, nil, true, 0)
	r := New(b, nil, false, 0)
	buf := append(make([]byte, HeaderRoom), pattern(1, 12)...)
	seg1, seg2 := pattern(2, 16<<10), pattern(3, 16<<10)
	segs := []Segment{{At: HeaderRoom + 4, Data: seg1}, {At: len(buf), Data: seg2}}
	step := func() {
		if err := w.WriteMessageSegments(buf, segs); err != nil {
			panic(err)
		}
		if msg, err := r.ReadMessage(); err != nil || len(msg) != 12+32<<10 {
			panic(err)
		}
	}
	step()
	require.Zero(t, testing.AllocsPerRun(200, step))
}

func TestVectoredAndInterruptible(t *testing.T) {
	tcpA, tcpB := connPair(t, "tcp")
	defer tcpA.Close()
	defer tcpB.Close()
	pipeA, pipeB := net.Pipe()
	defer pipeA.Close()
	defer pipeB.Close()
	tests := []struct {
		name                    string
		conn                    net.Conn
		vectored, interruptible bool
	}{
		{"tcp", tcpA, true, true},
		{"tls over tcp", tls.Client(tcpA, &tls.Config{}), false, true},
		{"pipe", pipeA, false, false},
		{"tls over a pipe", tls.Client(pipeA, &tls.Config{}), false, false},
		{"wrapper", struct{ net.Conn }{tcpA}, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.vectored, Vectored(tt.conn))
			require.Equal(t, tt.interruptible, Interruptible(tt.conn))
		})
	}
}
