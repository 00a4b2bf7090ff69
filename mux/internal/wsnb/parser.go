package wsnb

import (
	"encoding/binary"
	"sync"

	"github.com/gobwas/ws"

	"github.com/wsmux/wsmux/mux/internal/wsio"
)

// ctlPool holds the buffers of control frames split across reads.
var ctlPool = sync.Pool{New: func() any { return new([ws.MaxControlFramePayloadSize]byte) }}

// Kind is what Parser.Next found.
type Kind uint8

// Kinds of results of Next.
const (
	// More: every byte given was consumed and nothing is complete yet.
	More Kind = iota
	// Message: a whole binary message.
	Message
	// Ping: a ping frame (payload: its application data, to echo).
	Ping
	// Pong: a pong frame (nothing to do).
	Pong
	// Close: the peer's close frame (see Parser.CloseCode); Next returns a
	// *wsio.CloseError with it.
	Close
)

// Parser reassembles the frames of one connection's receive direction.
// Its zero value is not usable: see NewParser.
type Parser struct {
	client   bool // we are the client: frames must come unmasked
	in       bool // h is set: its payload is being received
	started  bool // a frame or message is partly received
	complete bool // msg holds the message Next returned last
	state    ws.State
	hdr      [ws.MaxHeaderSize]byte
	hn       int       // header bytes held in hdr
	h        ws.Header // the frame being received, once its header is whole
	left     int64     // payload bytes of h still to come
	moff     int       // mask offset within h's payload

	maxMessage int
	msg        *[]byte                              // the partial message's buffer (pooled)
	n          int                                  // message bytes held in msg
	ctl        *[ws.MaxControlFramePayloadSize]byte // a control frame split across reads (pooled)
	ctln       int

	ctlOut []byte // the last split control frame's payload
	err    error
}

// NewParser returns a parser for the client or the server end, bounding a
// reassembled message to maxMessage bytes.
func NewParser(client bool, maxMessage int) *Parser {
	p := &Parser{}
	p.Init(client, maxMessage)
	return p
}

// Init prepares a Parser embedded in its owner (see NewParser).
func (p *Parser) Init(client bool, maxMessage int) {
	*p = Parser{client: client, maxMessage: maxMessage, state: ws.StateServerSide}
	if client {
		p.state = ws.StateClientSide
	}
}

// Partial reports whether a frame or message is partly received: at
// least one of its bytes came and the rest has not. (A control frame
// between messages counts while it is partial.)
func (p *Parser) Partial() bool { return p.started }

// Holding returns the bytes of buffer the parser holds for a partial
// message (0 between messages).
func (p *Parser) Holding() int {
	if p.msg == nil {
		return 0
	}
	return cap(*p.msg)
}

// Release gives back the buffer of a partial message (the connection is
// being dropped). The Parser must not be used afterwards.
func (p *Parser) Release() {
	if p.err == nil {
		p.fail(errReleased)
	}
}

var errReleased = &wsio.ProtocolError{Close: ws.StatusGoingAway, Reason: "parser released"}

// Next consumes bytes of b, up to the end of the first complete message or
// control frame, and returns how many it consumed and what completed. The
// payload is valid until the next call of Next and until b is modified: a
// frame found whole in b is unmasked in place and returned from b. A
// Close returns the *wsio.CloseError and the payload is nil; violations
// return a *wsio.ProtocolError. Errors are sticky.
func (p *Parser) Next(b []byte) (int, Kind, []byte, error) {
	if p.err != nil {
		return 0, More, nil, p.err
	}
	n, k, payload, err := p.next(b)
	if err != nil {
		p.fail(err)
	}
	return n, k, payload, err
}

func (p *Parser) fail(err error) {
	p.err = err
	putBuffer(p.msg)
	p.msg = nil
	if p.ctl != nil {
		ctlPool.Put(p.ctl)
		p.ctl = nil
	}
}

func (p *Parser) next(b []byte) (int, Kind, []byte, error) {
	p.Done()
	used := 0
	for used < len(b) || (p.in && p.left == 0) {
		if !p.in {
			if p.hn == 0 && !p.state.Fragmented() {
				p.started = true
				// Fast path: a whole unfragmented frame in b.
				if k, size, payload, err, ok := p.whole(b[used:]); ok {
					if k == More {
						return used, More, nil, err // a violation
					}
					return used + size, k, payload, err
				}
			}
			m, err := p.header(b[used:])
			used += m
			if err != nil {
				return used, More, nil, err
			}
			if !p.in {
				return used, More, nil, nil // header incomplete
			}
		}
		// Payload of p.h.
		take := int(min(p.left, int64(len(b)-used)))
		chunk := b[used : used+take]
		used += take
		if p.h.Masked {
			ws.Cipher(chunk, p.h.Mask, p.moff)
		}
		p.moff += take
		p.left -= int64(take)
		if p.h.OpCode.IsControl() {
			if p.ctl == nil {
				p.ctl = ctlPool.Get().(*[ws.MaxControlFramePayloadSize]byte)
			}
			p.ctln += copy(p.ctl[p.ctln:], chunk)
		} else {
			p.appendMessage(chunk)
		}
		if p.left > 0 {
			return used, More, nil, nil
		}
		p.in = false
		if p.h.OpCode.IsControl() {
			if !p.state.Fragmented() {
				p.started = false
			}
			var payload []byte
			if p.ctl != nil {
				// The payload is copied out so that the buffer goes back now.
				p.ctlOut = append(p.ctlOut[:0], p.ctl[:p.ctln]...)
				payload = p.ctlOut
				ctlPool.Put(p.ctl)
				p.ctl = nil
			}
			k, payload, err := p.control(p.h.OpCode, payload)
			return used, k, payload, err
		}
		if p.h.Fin {
			p.state = p.state.Clear(ws.StateFragmented)
			p.started = false
			if p.msg == nil {
				return used, Message, []byte{}, nil
			}
			p.complete = true
			return used, Message, (*p.msg)[:p.n:p.n], nil
		}
		p.state = p.state.Set(ws.StateFragmented)
	}
	return used, More, nil, nil
}

// whole handles a frame that is complete in b (ok), or reports !ok.
func (p *Parser) whole(b []byte) (k Kind, size int, payload []byte, err error, ok bool) {
	if len(b) < 2 {
		return
	}
	hs := headerSize(b[0], b[1])
	if len(b) < hs {
		return
	}
	h, err := parseHeader(b[:hs])
	if err != nil {
		return More, 0, nil, err, true
	}
	if int64(len(b)-hs) < h.Length || !h.Fin && !h.OpCode.IsControl() {
		return
	}
	if err := p.check(h, 0); err != nil {
		return More, 0, nil, err, true
	}
	size = hs + int(h.Length)
	payload = b[hs:size:size]
	if h.Masked {
		ws.Cipher(payload, h.Mask, 0)
	}
	if h.OpCode.IsControl() {
		p.started = false
		k, payload, err = p.control(h.OpCode, payload)
		return k, size, payload, err, true
	}
	p.started = false
	return Message, size, payload, nil, true
}

// header accumulates the next frame's header from b; once it is whole it
// checks it and starts the frame (p.in).
func (p *Parser) header(b []byte) (int, error) {
	used := 0
	for {
		need := 2
		if p.hn >= 2 {
			need = headerSize(p.hdr[0], p.hdr[1])
		}
		if p.hn == need {
			break
		}
		if used == len(b) {
			return used, nil
		}
		m := copy(p.hdr[p.hn:need], b[used:])
		p.hn += m
		used += m
	}
	h, err := parseHeader(p.hdr[:p.hn])
	p.hn = 0
	if err != nil {
		return used, err
	}
	if err := p.check(h, p.n); err != nil {
		return used, err
	}
	p.h, p.in, p.left, p.moff, p.ctln = h, true, h.Length, 0, 0
	if !h.OpCode.IsControl() {
		p.reserve(int(h.Length))
	}
	return used, nil
}

// check validates h for the current state; have is the message's bytes so
// far.
func (p *Parser) check(h ws.Header, have int) error {
	if err := ws.CheckHeader(h, p.state); err != nil {
		return &wsio.ProtocolError{Close: ws.StatusProtocolError, Reason: err.Error()}
	}
	if h.OpCode.IsControl() {
		return nil
	}
	if h.OpCode == ws.OpText {
		return &wsio.ProtocolError{Close: ws.StatusUnsupportedData, Reason: "text frame (WSMUX/1 sends binary messages only)"}
	}
	if h.Length > int64(p.maxMessage-have) {
		return &wsio.ProtocolError{Close: ws.StatusMessageTooBig, Reason: "message exceeds the maximum message size"}
	}
	return nil
}

// reserve makes room for up to n more message bytes, but allocates at most
// growAhead beyond what is held: a declared length is never an allocation
// size by itself.
func (p *Parser) reserve(n int) {
	if p.msg != nil && cap(*p.msg)-p.n >= min(n, growAhead) {
		return
	}
	p.grow(p.n + min(n, growAhead))
}

const growAhead = 64 << 10

func (p *Parser) grow(need int) {
	size := need
	if p.msg != nil {
		size = max(size, 2*cap(*p.msg))
	}
	np := getBuffer(min(size, max(p.maxMessage, minBuffer)))
	if p.msg != nil {
		copy(*np, (*p.msg)[:p.n])
		putBuffer(p.msg)
	}
	p.msg = np
}

func (p *Parser) appendMessage(b []byte) {
	for len(b) > 0 {
		if p.msg == nil || p.n == cap(*p.msg) {
			p.grow(p.n + min(len(b)+int(p.left), growAhead))
		}
		m := copy((*p.msg)[p.n:cap(*p.msg)], b)
		p.n += m
		b = b[m:]
	}
}

// Done tells the parser the message the last Next returned has been
// used (Next does it too). The buffer it was assembled in is kept for the
// next message until Idle: a busy connection does not regrow it.
func (p *Parser) Done() {
	if p.complete {
		p.complete = false
		p.n = 0
	}
}

// Idle gives the message buffer back to the pool unless a message is
// partly received: call it when the connection has no more bytes for now,
// so that a connection between bursts holds none.
func (p *Parser) Idle() {
	p.Done()
	if p.n == 0 && !p.in && p.msg != nil {
		putBuffer(p.msg)
		p.msg = nil
	}
}

// PayloadBuffer returns where the next payload bytes of the data frame
// being received go, so that a reader can read them from the socket
// straight into the message buffer (then PayloadRead); it is empty when
// no data frame's payload is due. It grows the buffer as Next does: at
// most growAhead beyond what was received.
func (p *Parser) PayloadBuffer() []byte {
	if p.err != nil || !p.in || p.left == 0 || p.h.OpCode.IsControl() {
		return nil
	}
	if p.msg == nil || p.n == cap(*p.msg) {
		p.grow(p.n + min(int(p.left), growAhead))
	}
	end := min(cap(*p.msg), p.n+int(min(p.left, int64(cap(*p.msg)-p.n))))
	return (*p.msg)[p.n:end]
}

// PayloadRead accounts n bytes read into PayloadBuffer's slice; the next
// Next (with any bytes, or none) returns the message once it is whole.
func (p *Parser) PayloadRead(n int) {
	chunk := (*p.msg)[p.n : p.n+n]
	if p.h.Masked {
		ws.Cipher(chunk, p.h.Mask, p.moff)
	}
	p.moff += n
	p.left -= int64(n)
	p.n += n
}

// FrameDone reports whether the frame being received has all its bytes
// (after PayloadRead): a call of Next completes it.
func (p *Parser) FrameDone() bool { return p.in && p.left == 0 }

// control handles a whole control frame's payload.
func (p *Parser) control(op ws.OpCode, payload []byte) (Kind, []byte, error) {
	switch op {
	case ws.OpPing:
		return Ping, payload, nil
	case ws.OpPong:
		return Pong, nil, nil
	case ws.OpClose:
		return Close, nil, closeError(payload)
	}
	return More, nil, &wsio.ProtocolError{Close: ws.StatusProtocolError, Reason: "unknown control opcode"}
}

// closeError validates a close payload: a *wsio.CloseError, or a
// *wsio.ProtocolError when it is malformed.
func closeError(p []byte) error {
	switch {
	case len(p) == 0:
		return &wsio.CloseError{Code: ws.StatusNoStatusRcvd}
	case len(p) == 1:
		return &wsio.ProtocolError{Close: ws.StatusProtocolError, Reason: "close frame with a 1-byte payload"}
	}
	code := ws.StatusCode(binary.BigEndian.Uint16(p))
	reason := string(p[2:])
	if err := ws.CheckCloseFrameData(code, reason); err != nil {
		return &wsio.ProtocolError{Close: ws.StatusProtocolError, Reason: "invalid close frame: " + err.Error()}
	}
	if code >= 5000 {
		return &wsio.ProtocolError{Close: ws.StatusProtocolError, Reason: "invalid close frame: status code out of range"}
	}
	return &wsio.CloseError{Code: code, Reason: reason}
}

// headerSize returns the size of a header whose first two bytes are b0 b1.
func headerSize(b0, b1 byte) int {
	n := 2
	if b1&0x80 != 0 {
		n += 4
	}
	switch b1 & 0x7f {
	case 126:
		n += 2
	case 127:
		n += 8
	}
	return n
}

// parseHeader decodes a whole header (len(b) == headerSize).
func parseHeader(b []byte) (ws.Header, error) {
	var h ws.Header
	h.Fin = b[0]&0x80 != 0
	h.Rsv = (b[0] & 0x70) >> 4
	h.OpCode = ws.OpCode(b[0] & 0x0f)
	h.Masked = b[1]&0x80 != 0
	rest := b[2:]
	switch l := b[1] & 0x7f; l {
	case 126:
		h.Length = int64(binary.BigEndian.Uint16(rest))
		rest = rest[2:]
	case 127:
		if rest[0]&0x80 != 0 {
			return h, &wsio.ProtocolError{Close: ws.StatusProtocolError, Reason: ws.ErrHeaderLengthMSB.Error()}
		}
		h.Length = int64(binary.BigEndian.Uint64(rest))
		rest = rest[8:]
	default:
		h.Length = int64(l)
	}
	if h.Masked {
		copy(h.Mask[:], rest)
	}
	return h, nil
}
