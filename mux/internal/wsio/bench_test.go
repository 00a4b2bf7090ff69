package wsio

import (
	"net"
	"testing"

	"github.com/gobwas/ws"
)

var benchSizes = []int{64, 1 << 10, 16 << 10, 64 << 10, 1 << 20}

// discardConn accepts and drops every write.
type discardConn struct{ net.Conn }

func (discardConn) Write(p []byte) (int, error) { return len(p), nil }

// repeatConn serves the same bytes over and over.
type repeatConn struct {
	net.Conn
	data []byte
	pos  int
}

func (r *repeatConn) Read(p []byte) (int, error) {
	n := copy(p, r.data[r.pos:])
	r.pos += n
	if r.pos == len(r.data) {
		r.pos = 0
	}
	return n, nil
}

func BenchmarkWriteMessage(b *testing.B) {
	for _, n := range benchSizes {
		for _, client := range []bool{true, false} {
			b.Run(itoa(n)+"/"+roleName(client), func(b *testing.B) {
				c := New(discardConn{}, nil, client, 0)
				buf := append(make([]byte, HeaderRoom), pattern(1, n)...)
				b.ReportAllocs()
				b.SetBytes(int64(n))
				for b.Loop() {
					if err := c.WriteMessage(buf); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

func BenchmarkReadMessage(b *testing.B) {
	for _, n := range benchSizes {
		for _, client := range []bool{true, false} {
			b.Run(itoa(n)+"/"+roleName(client), func(b *testing.B) {
				// What the peer of this role sends: masked towards a server.
				frame := rawFrame(ws.OpBinary, true, 0, !client, pattern(1, n))
				c := New(&repeatConn{data: frame}, nil, client, 0)
				if _, err := c.ReadMessage(); err != nil { // grow the buffer once
					b.Fatal(err)
				}
				b.ReportAllocs()
				b.SetBytes(int64(n))
				for b.Loop() {
					msg, err := c.ReadMessage()
					if err != nil || len(msg) != n {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
