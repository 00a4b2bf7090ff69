package bench

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/gobwas/ws"
)

// ws: the raw WebSocket ceiling, what wsmux runs over. No multiplexing: a stream
// is one WebSocket connection (gobwas/ws handshake, no subprotocol, no
// extensions), every Write is one binary frame sent with one conn.Write (the
// server writes header and payload with one writev), and the client masks as
// RFC 6455 requires, into its own buffer since Write must not modify the
// caller's bytes. A Read returns bytes of one frame only, and waits for as
// much of the frame as fits in its buffer. Steady-state reads and writes make
// no allocations.
//
// CloseWrite sends a Close frame (1000) and the peer's Read returns io.EOF on
// it; the reverse direction keeps working. RFC 6455 would have the peer answer
// with its own Close and stop sending; this harness uses the Close frame as a
// half-close so the ceiling supports the same stream semantics as the
// multiplexers. Close sends the Close frame if not sent yet and closes the
// connection. Control frames other than Close are not expected (nobody sends
// pings here) and end the stream with an error.

func init() {
	Register(Transport{
		Name:        "ws",
		Ceiling:     true,
		Description: "raw gobwas/ws binary frames, one WebSocket connection per stream, client masks (the ceiling for wsmux)",
		MaxStreams:  ceilingMaxStreams(),
		Pair:        wsTransportPair,
	})
}

// wsMaxFrame bounds the payload of one frame so the client's masking buffer
// stays bounded; larger writes are sent as several frames.
const wsMaxFrame = 256 << 10

// wsReadBuffer is the size of the per-stream read buffer (allocated on the
// first Read, so idle streams do not hold it).
const wsReadBuffer = 4 << 10

type wsSession struct {
	ln    net.Listener // server side only
	url   string       // client side only
	conns *connSet
	wire  *wire // client side only
}

func (s *wsSession) Open() (Stream, error) {
	if s.ln != nil {
		return nil, errNotSupported
	}
	d := ws.Dialer{Timeout: 10 * time.Second, NetDial: s.wire.dial, TLSConfig: s.wire.clientTLS()}
	conn, br, _, err := d.Dial(context.Background(), s.url)
	if err != nil {
		return nil, err
	}
	return newWSStream(conn, br, true, s.conns), nil
}

func (s *wsSession) Accept() (Stream, error) {
	if s.ln == nil {
		return nil, errNotSupported
	}
	for {
		conn, err := s.ln.Accept()
		if err != nil {
			return nil, err
		}
		if !s.conns.add(conn) {
			return nil, net.ErrClosed
		}
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := ws.Upgrade(conn); err != nil {
			// A failed handshake loses that connection only.
			s.conns.remove(conn)
			conn.Close()
			continue
		}
		conn.SetDeadline(time.Time{})
		return newWSStream(conn, nil, false, s.conns), nil
	}
}

func (s *wsSession) Close() error {
	if s.ln != nil {
		s.ln.Close()
	}
	s.conns.closeAll()
	return nil
}

func wsTransportPair(tb testing.TB, n Net) (client, server Session, cleanup func()) {
	cconns, sconns := newConnSet(), newConnSet()
	sw, cw := n.wire(tb, sconns), n.wire(tb, cconns)
	ln := sw.listen(tb)
	cs := &wsSession{url: cw.scheme("ws", "wss") + "://" + ln.Addr().String() + "/", conns: cconns, wire: cw}
	ss := &wsSession{ln: ln, conns: sconns}
	return cs, ss, func() {
		cs.Close()
		ss.Close()
	}
}

// appendWriter is an io.Writer appending to a byte slice, so that
// ws.WriteHeaderBuffer can encode a header in front of the payload in one buffer.
type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

var errWSProtocol = errors.New("bench: ws: unexpected frame")

type wsStream struct {
	conn   net.Conn
	conns  *connSet
	client bool // masks what it sends, expects unmasked frames

	// read side, owned by the reader
	br      *bufio.Reader
	rem     int64 // payload bytes left in the current frame
	mask    [4]byte
	masked  bool
	pos     int // cipher offset in the current frame
	rhdr    [ws.MaxHeaderSize]byte
	readErr error

	// write side
	wmu       sync.Mutex
	hdr       [ws.MaxHeaderSize]byte
	out       appendWriter // header, plus the masked payload on the client
	vec       [2][]byte
	bufs      net.Buffers
	rng       rand.PCG
	closeSent bool
}

func newWSStream(conn net.Conn, br *bufio.Reader, client bool, conns *connSet) *wsStream {
	s := &wsStream{conn: conn, conns: conns, client: client, br: br}
	if client {
		s.rng.Seed(rand.Uint64(), rand.Uint64())
	}
	return s
}

func (s *wsStream) Read(p []byte) (int, error) {
	if s.readErr != nil {
		return 0, s.readErr
	}
	if s.br == nil {
		s.br = bufio.NewReaderSize(s.conn, wsReadBuffer)
	}
	for s.rem == 0 {
		h, err := ws.ReadHeaderBuffer(s.br, s.rhdr[:])
		if err != nil {
			s.readErr = err
			return 0, err
		}
		if h.Rsv != 0 || h.Masked == s.client {
			s.readErr = errWSProtocol
			return 0, s.readErr
		}
		switch h.OpCode {
		case ws.OpBinary, ws.OpContinuation:
			s.rem, s.mask, s.masked, s.pos = h.Length, h.Mask, h.Masked, 0
		case ws.OpClose:
			if h.Length > 125 {
				s.readErr = errWSProtocol
				return 0, s.readErr
			}
			// The close payload (status code) is not needed.
			if _, err := s.br.Discard(int(h.Length)); err != nil {
				s.readErr = err
				return 0, err
			}
			s.readErr = io.EOF
			return 0, io.EOF
		default:
			s.readErr = fmt.Errorf("%w: opcode %v", errWSProtocol, h.OpCode)
			return 0, s.readErr
		}
	}
	if int64(len(p)) > s.rem {
		p = p[:s.rem]
	}
	// The rest of the frame is on its way (the peer wrote it with one
	// write), so wait for as much of it as p holds: one Read per frame, as
	// a multiplexer reading whole messages would do.
	n, err := io.ReadFull(s.br, p)
	if s.masked {
		ws.Cipher(p[:n], s.mask, s.pos)
	}
	s.pos += n
	s.rem -= int64(n)
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		s.readErr = err
	}
	return n, err
}

func (s *wsStream) Write(p []byte) (int, error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.closeSent {
		return 0, net.ErrClosed
	}
	written := 0
	for len(p) > 0 {
		chunk := p
		if len(chunk) > wsMaxFrame {
			chunk = chunk[:wsMaxFrame]
		}
		if err := s.writeFrame(ws.OpBinary, chunk); err != nil {
			return written, err
		}
		written += len(chunk)
		p = p[len(chunk):]
	}
	return written, nil
}

// writeFrame sends one frame with one write call; s.wmu is held.
func (s *wsStream) writeFrame(op ws.OpCode, payload []byte) error {
	h := ws.Header{Fin: true, OpCode: op, Length: int64(len(payload))}
	if s.client {
		h.Masked = true
		m := s.rng.Uint64()
		h.Mask = [4]byte{byte(m), byte(m >> 8), byte(m >> 16), byte(m >> 24)}
	}
	s.out.b = s.out.b[:0]
	if err := ws.WriteHeaderBuffer(&s.out, h, s.hdr[:]); err != nil {
		return err
	}
	if s.client {
		hl := len(s.out.b)
		s.out.b = append(s.out.b, payload...)
		ws.Cipher(s.out.b[hl:], h.Mask, 0)
		_, err := s.conn.Write(s.out.b)
		return err
	}
	if len(payload) <= 1024 {
		s.out.b = append(s.out.b, payload...)
		_, err := s.conn.Write(s.out.b)
		return err
	}
	// Header and payload in one writev, without copying the payload.
	s.vec[0], s.vec[1] = s.out.b, payload
	s.bufs = s.vec[:]
	_, err := s.bufs.WriteTo(s.conn)
	s.vec[1] = nil
	return err
}

// sendClose sends the Close frame once; s.wmu is held.
func (s *wsStream) sendClose() error {
	if s.closeSent {
		return nil
	}
	s.closeSent = true
	var body [2]byte
	binary.BigEndian.PutUint16(body[:], uint16(ws.StatusNormalClosure))
	return s.writeFrame(ws.OpClose, body[:])
}

func (s *wsStream) CloseWrite() error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return s.sendClose()
}

func (s *wsStream) Close() error {
	// A writer blocked on a stalled peer holds wmu: do not wait for it.
	if s.wmu.TryLock() {
		s.conn.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
		s.sendClose()
		s.wmu.Unlock()
	}
	s.conns.remove(s.conn)
	return s.conn.Close()
}
