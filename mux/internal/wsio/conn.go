package wsio

import (
	"bufio"
	"crypto/tls"
	"net"
	"sync"
	"sync/atomic"

	"github.com/gobwas/ws"
)

// HeaderRoom is how many bytes a WriteMessage buffer must reserve in front of
// its payload: the largest WebSocket frame header (ws.MaxHeaderSize).
const HeaderRoom = ws.MaxHeaderSize

// DefaultMaxMessage is the bound on a reassembled message New uses when given
// a maxMessage of zero or less (the mux's MaxMessageSize default, 1 MiB).
const DefaultMaxMessage = 1 << 20

// Bits of Conn.pending: control replies queued by the reader for the writer.
const (
	pendPong uint32 = 1 << iota
	pendClose
)

// Conn reads and writes binary messages over an upgraded WebSocket
// connection.
//
// One goroutine may read (ReadMessage) while another writes (WriteMessage,
// FlushControl, WriteClose); neither side is safe for concurrent use by
// itself. SetNotify must be called before reading starts. BytesRead,
// BytesWritten and NetConn may be called from any goroutine.
type Conn struct {
	conn       net.Conn
	client     bool
	state      ws.State
	maxMessage int

	// Reader side, owned by the reading goroutine.
	src      source
	rd       *bufio.Reader
	hdr      [ws.MaxHeaderSize]byte
	buf      []byte  // message buffer; len(buf) == cap(buf) always
	bufp     *[]byte // the pooled buffer buf is (msgbuf.go)
	ctlIn    [ws.MaxControlFramePayloadSize]byte
	smallRun int
	shrink   bool
	rerr     error
	notify   func()
	onMsg    func(started bool)

	// Shared between the reader (producer) and the writer (consumer).
	pending   atomic.Uint32 // pendPong | pendClose
	closeSent atomic.Bool   // a close frame has been written (or is being written)
	mu        sync.Mutex    // guards pong, pongLen, closeCode
	pong      [ws.MaxControlFramePayloadSize]byte
	pongLen   int
	closeCode ws.StatusCode // code to echo in the close reply; 0 means an empty close payload

	nRead    atomic.Uint64
	nWritten atomic.Uint64

	// Writer side, owned by the writing goroutine.
	ctlOut [HeaderRoom + ws.MaxControlFramePayloadSize]byte
	werr   error
	vec    [][]byte    // WriteMessageSegments' pieces, kept for reuse
	bufs   net.Buffers // what WriteTo consumes (it advances the slice)
}

// source reads the bytes a handshake left buffered in br first, then the
// connection itself.
type source struct {
	br   *bufio.Reader
	conn net.Conn
}

func (s *source) Read(p []byte) (int, error) {
	if s.br != nil {
		if s.br.Buffered() > 0 {
			// With bytes buffered, bufio.Reader.Read copies only those and
			// never touches its underlying reader.
			return s.br.Read(p)
		}
		s.br = nil
	}
	return s.conn.Read(p)
}

// New wraps conn. br holds bytes already read past the handshake (may be nil);
// they are read before anything else, and br is not used once drained. client
// selects masking: a client masks what it writes and expects unmasked frames,
// a server the opposite. maxMessage bounds a reassembled message (zero or
// less means DefaultMaxMessage).
func New(conn net.Conn, br *bufio.Reader, client bool, maxMessage int) *Conn {
	if maxMessage <= 0 {
		maxMessage = DefaultMaxMessage
	}
	c := &Conn{
		conn:       conn,
		client:     client,
		maxMessage: maxMessage,
		state:      ws.StateServerSide,
	}
	if client {
		c.state = ws.StateClientSide
	}
	c.src = source{br: br, conn: conn}
	c.rd = bufio.NewReaderSize(&c.src, readBufferSize)
	return c
}

// SetNotify sets the function ReadMessage calls (from the reader goroutine)
// when it queues a control reply (a pong or a close reply) while none was
// pending, so the owner can wake its writer to call FlushControl. It must be
// called before reading starts; fn must not block.
func (c *Conn) SetNotify(fn func()) {
	c.notify = fn
}

// SetMessageHook sets the function ReadMessage calls (from the reader
// goroutine) with true when the first byte of a frame arrives while no
// message is in progress, and with false when that frame turned out to be a
// control frame outside a message or the message is complete (just before
// ReadMessage returns it). Between a true and the next false, a message is
// partly received: its owner can bound how long that lasts. It must be
// called before reading starts; fn must not block.
func (c *Conn) SetMessageHook(fn func(started bool)) {
	c.onMsg = fn
}

// NetConn returns the wrapped connection (for deadlines, addresses, Close).
func (c *Conn) NetConn() net.Conn {
	return c.conn
}

// BytesRead returns the number of wire bytes read so far: frame headers and
// payloads of every frame, control frames included.
func (c *Conn) BytesRead() uint64 {
	return c.nRead.Load()
}

// BytesWritten returns the number of wire bytes written so far, control
// frames included.
func (c *Conn) BytesWritten() uint64 {
	return c.nWritten.Load()
}

// Vectored reports whether conn writes a list of buffers with one system
// call (writev): a plain TCP or Unix socket. Over anything else (TLS, pipes,
// wrappers) WriteMessageSegments would cost a write per segment, so the
// caller copies into one buffer instead.
func Vectored(conn net.Conn) bool {
	switch conn.(type) {
	case *net.TCPConn, *net.UnixConn:
		return true
	}
	return false
}

// Interruptible reports whether a read deadline set while a Read of conn
// waits ends that Read cleanly and leaves conn usable, so a waiting reader
// can be interrupted between messages (Wait): plain TCP and Unix sockets,
// and TLS over them (crypto/tls keeps the part of a record it was reading
// when a deadline ended a Read; only a timed-out Write corrupts its state).
// Wrappers of unknown behaviour are not.
func Interruptible(conn net.Conn) bool {
	if tc, ok := conn.(*tls.Conn); ok {
		conn = tc.NetConn()
	}
	switch conn.(type) {
	case *net.TCPConn, *net.UnixConn:
		return true
	}
	return false
}
