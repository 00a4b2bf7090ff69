package wsio

import (
	"bufio"
	"crypto/tls"
	"encoding/binary"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/gobwas/ws"

	"github.com/wsmux/wsmux/mux/internal/pool"
)

// HeaderRoom is how many bytes a WriteMessage buffer must reserve in front of
// its payload: the largest WebSocket frame header (ws.MaxHeaderSize).
const HeaderRoom = ws.MaxHeaderSize

// DefaultMaxMessage is the bound on a reassembled message New uses when given
// a maxMessage of zero or less (the mux's MaxMessageSize default, 1 MiB).
const DefaultMaxMessage = 1 << 20

// Read buffer policy. The message buffer starts empty and grows, as payload
// bytes actually arrive, by doubling (at least minMessageBuffer, and at most
// growAhead bytes beyond what has been received), never past maxMessage. A
// peer's declared frame length is therefore never an allocation size by
// itself: a frame that declares 1 MiB and sends nothing costs nothing.
//
// Once the buffer is larger than shrinkAbove, each message that fits in
// shrinkAbove counts as small; after shrinkAfter small messages in a row the
// buffer goes back to a pool at the start of the next ReadMessage and grows
// again from minMessageBuffer. A session that moved one burst of large
// messages and then went quiet keeps at most shrinkAbove-ish bytes after a
// few keepalive pings instead of MaxMessageSize. Buffers come from pools of
// power-of-two sizes (msgbuf.go), so a session whose traffic alternates
// between bursts and quiet runs regrows without allocating.
const (
	readBufferSize   = 4 << 10  // bufio.Reader in front of the socket: small messages cost one read syscall
	minMessageBuffer = 4 << 10  // first allocation of the message buffer
	growAhead        = 64 << 10 // at most this many bytes are allocated beyond those received
	shrinkAbove      = 64 << 10 // buffers above this size are candidates for shrinking
	shrinkAfter      = 32       // consecutive small messages before a large buffer is released
)

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

// ReadMessage returns the next complete binary message, reassembled from
// continuation frames and unmasked in place. The slice is valid until the next
// ReadMessage (its buffer may then go back to a pool).
//
// Control frames between or inside fragmented messages are handled: a ping
// queues a pong for the writer (the latest ping's payload wins if several
// arrive before the writer flushes), a pong is ignored (its bytes still count
// in BytesRead), and a close queues a close reply echoing the peer's code and
// returns a *CloseError.
//
// Every violation returns a *ProtocolError with the close code to send: text
// frame (1003); reserved opcode, RSV bits, wrong mask bit for the role, a
// control frame over 125 bytes or fragmented, a continuation without a start
// or a new data frame inside a fragmented message, an invalid close payload
// (1002); a message over maxMessage (1009, decided from the declared length
// before any of the payload is read). I/O errors are returned as they are
// (io.EOF when the connection ends between frames, io.ErrUnexpectedEOF
// inside a frame or a fragmented message).
//
// The message buffer grows with the bytes that actually arrive (never to a
// peer-declared length) up to maxMessage, and is released again after a run of
// small messages (see the read buffer policy constants), so an idle session
// does not keep a MaxMessageSize buffer.
//
// Errors are sticky: once ReadMessage has failed it returns the same error.
func (c *Conn) ReadMessage() ([]byte, error) {
	if c.rerr != nil {
		return nil, c.rerr
	}
	msg, err := c.readMessage()
	if err != nil {
		c.rerr = err
		return nil, err
	}
	return msg, nil
}

// Wait blocks until the first byte of the next frame is here (or an error).
// It consumes nothing, and an error from it is not sticky: a read deadline
// that expires during Wait leaves the connection as it was, so a reader can
// be interrupted between messages (the mux's leader reads). Call it only
// between messages (after ReadMessage returned). A sticky read error is
// returned as it is.
func (c *Conn) Wait() error {
	if c.rerr != nil {
		return c.rerr
	}
	_, err := c.rd.Peek(1)
	return err
}

// Buffered reports how many bytes are already read from the socket and not
// yet consumed: with none, the next ReadMessage waits on the socket.
func (c *Conn) Buffered() int {
	return c.rd.Buffered()
}

func (c *Conn) readMessage() ([]byte, error) {
	if c.shrink {
		putMessageBuffer(c.bufp)
		c.buf, c.bufp = nil, nil
		c.shrink = false
		c.smallRun = 0
	}
	n := 0 // message bytes received so far
	state := c.state
	for {
		if c.onMsg == nil && !state.Fragmented() {
			// A header's first byte is here before ReadHeaderBuffer
			// starts, so an io.EOF from it is an end inside the header.
			if _, err := c.rd.Peek(1); err != nil {
				return nil, err
			}
		}
		if c.onMsg != nil && !state.Fragmented() {
			// The clock of a partly received message starts with its
			// first byte, not when we begin to wait for it.
			if _, err := c.rd.Peek(1); err != nil {
				return nil, err
			}
			c.onMsg(true)
		}
		h, err := ws.ReadHeaderBuffer(c.rd, c.hdr[:])
		if err != nil {
			if err == ws.ErrHeaderLengthMSB || err == ws.ErrHeaderLengthUnexpected {
				return nil, &ProtocolError{Close: ws.StatusProtocolError, Reason: err.Error()}
			}
			if err == io.EOF { // inside a header (peeked above) or a fragmented message
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		c.nRead.Add(uint64(ws.HeaderSize(h)))

		if err := ws.CheckHeader(h, state); err != nil {
			return nil, &ProtocolError{Close: ws.StatusProtocolError, Reason: err.Error()}
		}
		if h.OpCode.IsControl() {
			if err := c.readControl(h); err != nil {
				return nil, err
			}
			if c.onMsg != nil && !state.Fragmented() {
				c.onMsg(false)
			}
			continue
		}
		if h.OpCode == ws.OpText {
			return nil, &ProtocolError{Close: ws.StatusUnsupportedData, Reason: "text frame (WSMUX/1 sends binary messages only)"}
		}
		// A binary frame that starts a message or a continuation of one.
		if h.Length > int64(c.maxMessage-n) {
			return nil, &ProtocolError{Close: ws.StatusMessageTooBig, Reason: "message exceeds the maximum message size"}
		}
		length := int(h.Length)
		if err := c.readPayload(n, n+length); err != nil {
			return nil, err
		}
		if h.Masked {
			ws.Cipher(c.buf[n:n+length], h.Mask, 0)
		}
		n += length
		if h.Fin {
			c.account(n)
			if c.onMsg != nil {
				c.onMsg(false)
			}
			return c.buf[:n:n], nil
		}
		state = state.Set(ws.StateFragmented)
	}
}

// readPayload reads the bytes of c.buf[off:end] from the wire, growing c.buf
// only as bytes actually arrive (see the read buffer policy above).
func (c *Conn) readPayload(off, end int) error {
	for off < end {
		if off == len(c.buf) {
			c.grow(off, end)
		}
		m, err := io.ReadFull(c.rd, c.buf[off:min(end, len(c.buf))])
		off += m
		c.nRead.Add(uint64(m))
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
	}
	return nil
}

// grow replaces c.buf by a larger buffer holding its first have bytes; need
// is the end of the frame being read (need <= maxMessage).
func (c *Conn) grow(have, need int) {
	size := max(2*len(c.buf), have+min(need-have, growAhead), minMessageBuffer)
	size = min(size, max(c.maxMessage, minMessageBuffer))
	np := getMessageBuffer(size)
	copy(*np, c.buf[:have])
	putMessageBuffer(c.bufp)
	c.buf, c.bufp = *np, np
}

// account applies the shrink policy after a message of n bytes.
func (c *Conn) account(n int) {
	if len(c.buf) <= shrinkAbove {
		c.smallRun = 0
		return
	}
	if n > shrinkAbove {
		c.smallRun = 0
		return
	}
	c.smallRun++
	if c.smallRun >= shrinkAfter {
		c.shrink = true
	}
}

// readControl reads and handles the payload of a control frame whose header
// CheckHeader accepted (final, at most 125 bytes).
func (c *Conn) readControl(h ws.Header) error {
	p := c.ctlIn[:h.Length]
	m, err := io.ReadFull(c.rd, p)
	c.nRead.Add(uint64(m))
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return err
	}
	if h.Masked {
		ws.Cipher(p, h.Mask, 0)
	}
	switch h.OpCode {
	case ws.OpPing:
		c.mu.Lock()
		c.pongLen = copy(c.pong[:], p)
		c.mu.Unlock()
		c.queue(pendPong)
		return nil
	case ws.OpPong:
		return nil
	case ws.OpClose:
		return c.handleClose(p)
	default:
		// CheckHeader rejects reserved opcodes; unreachable.
		return &ProtocolError{Close: ws.StatusProtocolError, Reason: "unknown control opcode"}
	}
}

func (c *Conn) handleClose(p []byte) error {
	code := ws.StatusNoStatusRcvd
	reason := ""
	var echo ws.StatusCode
	switch {
	case len(p) == 1:
		return &ProtocolError{Close: ws.StatusProtocolError, Reason: "close frame with a 1-byte payload"}
	case len(p) >= 2:
		code = ws.StatusCode(binary.BigEndian.Uint16(p))
		reason = string(p[2:])
		if err := ws.CheckCloseFrameData(code, reason); err != nil {
			return &ProtocolError{Close: ws.StatusProtocolError, Reason: "invalid close frame: " + err.Error()}
		}
		if code >= 5000 {
			return &ProtocolError{Close: ws.StatusProtocolError, Reason: "invalid close frame: status code out of range"}
		}
		echo = code
	}
	if !c.closeSent.Load() {
		c.mu.Lock()
		c.closeCode = echo
		c.mu.Unlock()
		c.queue(pendClose)
	}
	return &CloseError{Code: code, Reason: reason}
}

// queue marks a control reply pending and wakes the writer if nothing was.
func (c *Conn) queue(bit uint32) {
	if c.pending.Or(bit) == 0 && c.notify != nil {
		c.notify()
	}
}

// nopWriter lets ws.WriteHeaderBuffer encode a header into a caller's buffer
// without sending it anywhere.
type nopWriter struct{}

func (nopWriter) Write(p []byte) (int, error) { return len(p), nil }

// frame encodes a final frame header for op and buf[HeaderRoom:] right-aligned
// into buf[:HeaderRoom], masks the payload in place on a client, and returns
// where the frame starts in buf.
func (c *Conn) frame(buf []byte, op ws.OpCode) int {
	start, mask := c.header(buf, op, len(buf)-HeaderRoom)
	if c.client {
		ws.Cipher(buf[HeaderRoom:], mask, 0)
	}
	return start
}

// header encodes a final frame header for op and a payload of length bytes
// right-aligned into buf[:HeaderRoom] and returns where it starts in buf and,
// on a client, the fresh mask the payload must be masked with.
func (c *Conn) header(buf []byte, op ws.OpCode, length int) (int, [4]byte) {
	h := ws.Header{Fin: true, OpCode: op, Length: int64(length)}
	if c.client {
		h.Masked = true
		h.Mask = ws.NewMask()
	}
	// The header is encoded at buf[0:size] (WriteHeaderBuffer uses its
	// argument as scratch and hands the bytes to nopWriter), then moved next
	// to the payload.
	_ = ws.WriteHeaderBuffer(nopWriter{}, h, buf[:HeaderRoom])
	size := ws.HeaderSize(h)
	start := HeaderRoom - size
	copy(buf[start:HeaderRoom], buf[:size])
	return start, h.Mask
}

// writable returns the error a message in buf cannot be written with, or nil.
func (c *Conn) writable(buf []byte) error {
	switch {
	case c.werr != nil:
		return c.werr
	case len(buf) < HeaderRoom:
		return io.ErrShortBuffer
	case c.closeSent.Load():
		return ErrCloseSent
	}
	return nil
}

// wrote counts n bytes written of want and makes a failure sticky.
func (c *Conn) wrote(n, want int64, err error) error {
	c.nWritten.Add(uint64(n))
	if err == nil && n < want {
		err = io.ErrShortWrite
	}
	if err != nil {
		c.werr = err
	}
	return err
}

// write sends p with one conn.Write; a failure is sticky for the writer.
func (c *Conn) write(p []byte) error {
	n, err := c.conn.Write(p)
	return c.wrote(int64(n), int64(len(p)), err)
}

// WriteMessage sends buf[HeaderRoom:] as one binary WebSocket message with a
// single conn.Write. buf must have HeaderRoom bytes reserved in front of the
// payload (their content is overwritten): the header is written right-aligned
// into that room and, on a client, the payload is masked in place, so buf must
// be the caller's own buffer (never user memory). After it returns the payload
// bytes are garbage on a client. Nothing outside buf is touched.
//
// It returns io.ErrShortBuffer if len(buf) < HeaderRoom, ErrCloseSent once a
// close frame has been sent, and the first write error for good once one
// occurred.
func (c *Conn) WriteMessage(buf []byte) error {
	if err := c.writable(buf); err != nil {
		return err
	}
	start := c.frame(buf, ws.OpBinary)
	return c.write(buf[start:])
}

// Segment is a run of payload bytes that WriteMessageSegments splices into
// a message without copying: Data goes out right after the first At bytes
// of the buffer's payload (At counts from the start of the buffer, header
// room included, and segments are in ascending At order).
type Segment = pool.Segment

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

// WriteMessageSegments is WriteMessage with segs spliced into the payload:
// the message is buf[HeaderRoom:segs[0].At] + segs[0].Data +
// buf[segs[0].At:segs[1].At] + ... + buf[segs[n-1].At:], written with one
// vectored write (see Vectored). On a client every piece, the segments
// included, is masked in place: they must be the caller's own memory, and
// are garbage afterwards.
func (c *Conn) WriteMessageSegments(buf []byte, segs []Segment) error {
	if len(segs) == 0 {
		return c.WriteMessage(buf)
	}
	if err := c.writable(buf); err != nil {
		return err
	}
	length := len(buf) - HeaderRoom
	for _, sg := range segs {
		length += len(sg.Data)
	}
	start, mask := c.header(buf, ws.OpBinary, length)
	vec := append(c.vec[:0], buf[start:HeaderRoom])
	off, prev := 0, HeaderRoom
	piece := func(p []byte) {
		if len(p) == 0 {
			return
		}
		if c.client {
			ws.Cipher(p, mask, off)
			off += len(p)
		}
		vec = append(vec, p)
	}
	for _, sg := range segs {
		piece(buf[prev:sg.At])
		piece(sg.Data)
		prev = sg.At
	}
	piece(buf[prev:])
	c.vec, c.bufs = vec, vec
	n, err := c.bufs.WriteTo(c.conn)
	clear(vec) // drop the references to the caller's memory
	return c.wrote(n, int64(HeaderRoom-start+length), err)
}

// ControlPending reports whether a pong or a close reply is queued for
// FlushControl (so the writer can refresh its write deadline first).
func (c *Conn) ControlPending() bool {
	return c.pending.Load() != 0
}

// FlushControl writes any queued pong and then any queued close reply, each
// as its own control frame with one conn.Write. The writer calls it before
// each batch; when nothing is queued it costs one atomic load. Nothing is
// written once a close frame has been sent.
func (c *Conn) FlushControl() error {
	if c.pending.Load() == 0 {
		return nil
	}
	if c.werr != nil {
		return c.werr
	}
	bits := c.pending.Swap(0)
	if bits&pendPong != 0 && !c.closeSent.Load() {
		c.mu.Lock()
		n := copy(c.ctlOut[HeaderRoom:], c.pong[:c.pongLen])
		c.mu.Unlock()
		if err := c.writeControl(ws.OpPong, n); err != nil {
			return err
		}
	}
	if bits&pendClose != 0 && !c.closeSent.Swap(true) {
		c.mu.Lock()
		code := c.closeCode
		c.mu.Unlock()
		n := 0
		if code != 0 {
			binary.BigEndian.PutUint16(c.ctlOut[HeaderRoom:], uint16(code))
			n = 2
		}
		return c.writeControl(ws.OpClose, n)
	}
	return nil
}

// writeControl sends a control frame whose n payload bytes are in
// c.ctlOut[HeaderRoom:].
func (c *Conn) writeControl(op ws.OpCode, n int) error {
	buf := c.ctlOut[:HeaderRoom+n]
	start := c.frame(buf, op)
	return c.write(buf[start:])
}

// maxCloseReason is the room for a reason in a close frame: 125 bytes of
// control payload less the 2-byte status code.
const maxCloseReason = ws.MaxControlFramePayloadSize - 2

// WriteClose sends a close frame with code and reason. The reason is
// truncated to 123 bytes (at a UTF-8 character boundary) to fit a control
// frame; a code of 0 sends an empty close payload (and no reason). Only one
// close frame is ever sent: if one was already sent (by WriteClose or as
// FlushControl's reply to the peer's close) WriteClose does nothing and
// returns nil. Queued pongs are not flushed by WriteClose.
func (c *Conn) WriteClose(code ws.StatusCode, reason string) error {
	if c.werr != nil {
		return c.werr
	}
	if c.closeSent.Swap(true) {
		return nil
	}
	n := 0
	if code != 0 {
		if len(reason) > maxCloseReason {
			cut := maxCloseReason
			for cut > 0 && !utf8.RuneStart(reason[cut]) {
				cut--
			}
			reason = reason[:cut]
		}
		binary.BigEndian.PutUint16(c.ctlOut[HeaderRoom:], uint16(code))
		n = 2 + copy(c.ctlOut[HeaderRoom+2:], reason)
	}
	return c.writeControl(ws.OpClose, n)
}
