package frame

import (
	"encoding/binary"
	"unicode/utf8"
)

// Type is a frame type.
type Type uint8

// Frame types.
const (
	TypeData         Type = 0x0 // stream bytes; the only flow-controlled frame
	TypeHeaders      Type = 0x1 // open (SYN), accept (ACK) or metadata of a stream
	TypeWindowUpdate Type = 0x2 // credit for a stream (id > 0) or the session (id 0)
	TypeRSTStream    Type = 0x3 // ends both directions of a stream with a code
	TypeStopSending  Type = 0x4 // asks the peer to stop sending on a stream
	TypePing         Type = 0x5 // liveness and RTT
	TypeGoAway       Type = 0x6 // no new streams; last processed peer stream id
	TypeSettings     Type = 0x7 // each side's parameters, exactly once, first frame
	TypeMaxStreams   Type = 0x8 // new cumulative credit of peer-opened streams

	numTypes = 9
)

// Extension frame types: valid only on a session that negotiated their
// extension (Limits), else unknown types like any other.
const (
	// TypeReceived acknowledges the bytes received (docs/spec/wsmux-resume-v1.md):
	// stream 0, no flags, no payload, Arg the received count mod 2^32.
	TypeReceived Type = 0x9
)

var typeNames = [numTypes]string{"DATA", "HEADERS", "WINDOW_UPDATE", "RST_STREAM", "STOP_SENDING", "PING", "GOAWAY", "SETTINGS", "MAX_STREAMS"}

// String returns the type's protocol name.
func (t Type) String() string {
	if t < numTypes {
		return typeNames[t]
	}
	if t == TypeReceived {
		return "RECEIVED"
	}
	return "UNKNOWN"
}

// Flags are a frame's flag bits; which are defined depends on the type.
type Flags uint8

// Flag bits.
const (
	FlagFIN Flags = 0x1 // DATA, HEADERS: the sender's last frame on the stream
	FlagSYN Flags = 0x2 // HEADERS: opens a stream
	FlagACK Flags = 0x4 // HEADERS: accepts a stream; PING: an answer
)

// Has reports whether every bit of v is set in f.
func (f Flags) Has(v Flags) bool { return f&v == v }

// Sizes and limits fixed by the protocol.
const (
	HeaderSize     = 12        // bytes of every frame header
	MaxPayload     = 1<<16 - 1 // largest Length a header can carry
	MaxStreamID    = 1<<31 - 1 // stream ids are 31 bits
	MaxDelta       = 1<<31 - 1 // largest WINDOW_UPDATE delta
	MaxCredit      = 1<<31 - 1 // largest MAX_STREAMS credit
	MaxReasonLen   = 128       // RST_STREAM reason bytes
	MaxDebugLen    = 256       // GOAWAY debug bytes
	MaxSettings    = 16        // entries in one SETTINGS frame
	settingSize    = 6
	maxSettingsLen = MaxSettings * settingSize

	// DefaultMaxDataPayload is the default largest DATA payload (16 KiB).
	DefaultMaxDataPayload = 16 << 10
	// MinMaxDataPayload is the smallest MaxDataPayload a peer may announce.
	MinMaxDataPayload = 4 << 10
)

// Header is the fixed 12-byte part of every frame. For GOAWAY, StreamID is the
// last peer stream id processed. Arg is the type's 32-bit argument: the delta
// of WINDOW_UPDATE, the error code of RST_STREAM, STOP_SENDING and GOAWAY, the
// opaque value of PING, the credit of MAX_STREAMS, zero otherwise.
type Header struct {
	Type     Type
	Flags    Flags
	Length   uint16
	StreamID uint32
	Arg      uint32
}

// Frame is a header and its payload. Payload aliases the parsed message.
type Frame struct {
	Header
	Payload []byte
}

// Code returns Arg as an error code (RST_STREAM, STOP_SENDING, GOAWAY).
func (h Header) Code() ErrorCode { return ErrorCode(h.Arg) }

// Limits are the negotiated bounds a decoder enforces.
type Limits struct {
	MaxDataPayload int         // largest DATA payload (16 KiB default)
	Block          BlockLimits // header block bounds of HEADERS frames
	// Resume: the session negotiated resumption, so RECEIVED frames are
	// valid (docs/spec/wsmux-resume-v1.md).
	Resume bool
}

// DefaultLimits returns the protocol defaults.
func DefaultLimits() Limits {
	return Limits{MaxDataPayload: DefaultMaxDataPayload, Block: DefaultBlockLimits()}
}

// streamRule says where a type may appear.
const (
	onStream  = 1 // stream id must be > 0
	onSession = 2 // stream id must be 0
	onEither  = 3
)

type rule struct {
	flags  Flags  // defined flag bits
	where  uint8  // onStream, onSession or onEither
	argZ   bool   // Arg must be zero
	maxLen uint16 // largest Length before negotiated limits
}

var rules = [numTypes]rule{
	TypeData:         {FlagFIN, onStream, true, MaxPayload},
	TypeHeaders:      {FlagFIN | FlagSYN | FlagACK, onStream, true, MaxPayload},
	TypeWindowUpdate: {0, onEither, false, 0},
	TypeRSTStream:    {0, onStream, false, MaxReasonLen},
	TypeStopSending:  {0, onStream, false, 0},
	TypePing:         {FlagACK, onSession, false, 0},
	TypeGoAway:       {0, onEither, false, MaxDebugLen},
	TypeSettings:     {0, onSession, true, maxSettingsLen},
	TypeMaxStreams:   {0, onSession, false, 0},
}

// ParseHeader decodes and checks the first HeaderSize bytes of b: the rules
// a header can break without its payload or negotiated limits. b must hold
// at least HeaderSize bytes, else ErrShortHeader.
func ParseHeader(b []byte) (h Header, err error) {
	if len(b) < HeaderSize {
		return Header{}, ErrShortHeader
	}
	h.decode(b)
	return h, h.check()
}

// decode fills h from the first HeaderSize bytes of b without checking it.
func (h *Header) decode(b []byte) {
	_ = b[HeaderSize-1]
	w0 := binary.BigEndian.Uint32(b)
	h.Type = Type(w0 >> 24)
	h.Flags = Flags(w0 >> 16)
	h.Length = uint16(w0)
	h.StreamID = binary.BigEndian.Uint32(b[4:])
	h.Arg = binary.BigEndian.Uint32(b[8:])
}

// check applies the header-only rules of the type table.
func (h *Header) check() error {
	if h.Type >= numTypes {
		return ErrUnknownType
	}
	r := &rules[h.Type]
	if h.Flags&^r.flags != 0 {
		return ErrUnknownFlags
	}
	if h.StreamID > MaxStreamID {
		return ErrReservedBit
	}
	if h.StreamID == 0 && r.where == onStream {
		return ErrNeedStreamID
	}
	if h.StreamID != 0 && r.where == onSession {
		return ErrNeedSession
	}
	if r.argZ && h.Arg != 0 {
		return ErrNonZeroArg
	}
	if h.Length > r.maxLen {
		switch {
		case r.maxLen == 0:
			return ErrPayloadNotAllowed
		case h.Type == TypeRSTStream:
			return ErrReasonTooLong
		case h.Type == TypeGoAway:
			return ErrDebugTooLong
		default:
			return ErrSettingsLength
		}
	}
	switch h.Type {
	case TypeData:
		if h.Length == 0 && h.Flags&FlagFIN == 0 {
			return ErrEmptyData
		}
	case TypeHeaders:
		if h.Flags.Has(FlagSYN | FlagACK) {
			return ErrSynAndAck
		}
	case TypeWindowUpdate:
		if h.Arg == 0 {
			return ErrZeroDelta
		}
		if h.Arg > MaxDelta {
			return ErrDeltaTooLarge
		}
	case TypeSettings:
		if h.Length%settingSize != 0 {
			return ErrSettingsLength
		}
	case TypeMaxStreams:
		if h.Arg > MaxCredit {
			return ErrCreditTooLarge
		}
	}
	return nil
}

// checkReceived applies the header rules of RECEIVED, in the order of
// section 3.2: flags, reserved bit, stream id 0, no payload.
func (h *Header) checkReceived() error {
	switch {
	case h.Flags != 0:
		return ErrUnknownFlags
	case h.StreamID > MaxStreamID:
		return ErrReservedBit
	case h.StreamID != 0:
		return ErrNeedSession
	case h.Length != 0:
		return ErrPayloadNotAllowed
	}
	return nil
}

// Parse decodes and validates the frame at the start of b and returns it
// with the number of bytes it took. The payload is checked against lim and,
// by type, for UTF-8 text, SETTINGS entries and header block syntax; it
// aliases b.
func Parse(b []byte, lim *Limits) (f Frame, n int, err error) {
	if len(b) < HeaderSize {
		return Frame{}, 0, ErrShortHeader
	}
	f.Header.decode(b)
	if f.Type == TypeReceived && lim.Resume {
		if err := f.Header.checkReceived(); err != nil {
			return Frame{}, 0, err
		}
	} else if err := f.Header.check(); err != nil {
		return Frame{}, 0, err
	}
	n = HeaderSize + int(f.Length)
	if len(b) < n {
		return Frame{}, 0, ErrShortPayload
	}
	f.Payload = b[HeaderSize:n:n]
	if err := f.checkPayload(lim); err != nil {
		return Frame{}, 0, err
	}
	return f, n, nil
}

func (f *Frame) checkPayload(lim *Limits) error {
	switch f.Type {
	case TypeData:
		if len(f.Payload) > lim.MaxDataPayload {
			return ErrDataTooLarge
		}
	case TypeHeaders:
		if len(f.Payload) > lim.Block.MaxBytes {
			return ErrHeadersTooLarge
		}
		return CheckHeaderBlock(f.Payload, &lim.Block)
	case TypeRSTStream, TypeGoAway:
		if !utf8.Valid(f.Payload) {
			return ErrNotUTF8
		}
	case TypeSettings:
		var s Settings
		return s.parse(f.Payload)
	}
	return nil
}

// Iterator walks the frames of one WebSocket message. The zero value holds
// no message; Reset gives it one:
//
//	it.Reset(msg, lim)
//	for it.Next() { f := it.Frame(); ... }
//	err := it.Err()
type Iterator struct {
	rest  []byte
	lim   Limits
	f     Frame
	err   error
	count int
}

// Reset starts a walk over msg with limits lim.
func (it *Iterator) Reset(msg []byte, lim Limits) {
	*it = Iterator{rest: msg, lim: lim}
	if len(msg) == 0 {
		it.err = ErrEmptyMessage
	}
}

// Next decodes the next frame. It returns false at the end of the message or
// at the first error, which Err then returns.
func (it *Iterator) Next() bool {
	if it.err != nil || len(it.rest) == 0 {
		return false
	}
	f, n, err := Parse(it.rest, &it.lim)
	if err != nil {
		it.err = err
		it.rest = nil
		return false
	}
	it.f = f
	it.rest = it.rest[n:]
	it.count++
	return true
}

// SetLimits changes the limits the frames after the current one are
// checked against (a SETTINGS frame that negotiated an extension).
func (it *Iterator) SetLimits(lim Limits) { it.lim = lim }

// Frame returns the frame decoded by the last successful Next.
func (it *Iterator) Frame() Frame { return it.f }

// Err returns the error that stopped the walk, or nil.
func (it *Iterator) Err() error { return it.err }

// Count returns how many frames Next has decoded since Reset.
func (it *Iterator) Count() int { return it.count }

// AppendHeader appends h's 12 bytes to dst without checking it.
func AppendHeader(dst []byte, h Header) []byte {
	return binary.BigEndian.AppendUint32(
		binary.BigEndian.AppendUint32(
			binary.BigEndian.AppendUint32(dst, uint32(h.Type)<<24|uint32(h.Flags)<<16|uint32(h.Length)),
			h.StreamID),
		h.Arg)
}

// appendFrame checks h against the rules a decoder enforces and appends the
// header and payload. dst is returned unchanged on error.
func appendFrame(dst []byte, h Header, payload []byte) ([]byte, error) {
	if len(payload) > MaxPayload {
		if h.Type == TypeHeaders {
			return dst, ErrHeadersTooLarge
		}
		return dst, ErrDataTooLarge
	}
	h.Length = uint16(len(payload))
	if err := h.check(); err != nil {
		return dst, err
	}
	return append(AppendHeader(dst, h), payload...), nil
}

// AppendData appends a DATA frame. An empty payload needs fin.
func AppendData(dst []byte, streamID uint32, fin bool, payload []byte) ([]byte, error) {
	var fl Flags
	if fin {
		fl = FlagFIN
	}
	return appendFrame(dst, Header{Type: TypeData, Flags: fl, StreamID: streamID}, payload)
}

// AppendDataHeader appends only the header of a DATA frame of n payload
// bytes, for writers that copy the payload themselves. n must be in
// 0..MaxPayload, else ErrDataTooLarge.
func AppendDataHeader(dst []byte, streamID uint32, fin bool, n int) ([]byte, error) {
	if n < 0 || n > MaxPayload {
		return dst, ErrDataTooLarge
	}
	h := Header{Type: TypeData, Length: uint16(n), StreamID: streamID}
	if fin {
		h.Flags = FlagFIN
	}
	if err := h.check(); err != nil {
		return dst, err
	}
	return AppendHeader(dst, h), nil
}

// AppendHeadersBlock appends a HEADERS frame whose block is already encoded.
// flags may hold SYN or ACK (not both) and FIN.
func AppendHeadersBlock(dst []byte, streamID uint32, flags Flags, block []byte) ([]byte, error) {
	return appendFrame(dst, Header{Type: TypeHeaders, Flags: flags, StreamID: streamID}, block)
}

// AppendWindowUpdate appends a WINDOW_UPDATE of delta (1..2^31-1) for a
// stream, or for the session when streamID is 0.
func AppendWindowUpdate(dst []byte, streamID, delta uint32) ([]byte, error) {
	return appendFrame(dst, Header{Type: TypeWindowUpdate, StreamID: streamID, Arg: delta}, nil)
}

// AppendRSTStream appends a RST_STREAM with code and an optional UTF-8 reason
// of at most MaxReasonLen bytes.
func AppendRSTStream(dst []byte, streamID uint32, code ErrorCode, reason string) ([]byte, error) {
	if len(reason) > MaxReasonLen {
		return dst, ErrReasonTooLong
	}
	if !utf8.ValidString(reason) {
		return dst, ErrNotUTF8
	}
	h := Header{Type: TypeRSTStream, Length: uint16(len(reason)), StreamID: streamID, Arg: uint32(code)}
	if err := h.check(); err != nil {
		return dst, err
	}
	return append(AppendHeader(dst, h), reason...), nil
}

// AppendStopSending appends a STOP_SENDING with code.
func AppendStopSending(dst []byte, streamID uint32, code ErrorCode) ([]byte, error) {
	return appendFrame(dst, Header{Type: TypeStopSending, StreamID: streamID, Arg: uint32(code)}, nil)
}

// AppendPing appends a PING carrying opaque; ack marks an answer.
func AppendPing(dst []byte, ack bool, opaque uint32) []byte {
	h := Header{Type: TypePing, Arg: opaque}
	if ack {
		h.Flags = FlagACK
	}
	return AppendHeader(dst, h)
}

// AppendGoAway appends a GOAWAY naming the last peer stream processed, code
// and optional UTF-8 debug text of at most MaxDebugLen bytes.
func AppendGoAway(dst []byte, lastStreamID uint32, code ErrorCode, debug string) ([]byte, error) {
	if len(debug) > MaxDebugLen {
		return dst, ErrDebugTooLong
	}
	if !utf8.ValidString(debug) {
		return dst, ErrNotUTF8
	}
	h := Header{Type: TypeGoAway, Length: uint16(len(debug)), StreamID: lastStreamID, Arg: uint32(code)}
	if err := h.check(); err != nil {
		return dst, err
	}
	return append(AppendHeader(dst, h), debug...), nil
}

// AppendReceived appends a RECEIVED frame acknowledging count received
// bytes (mod 2^32). Only for sessions that negotiated resumption.
func AppendReceived(dst []byte, count uint32) []byte {
	return AppendHeader(dst, Header{Type: TypeReceived, Arg: count})
}

// AppendMaxStreams appends a MAX_STREAMS granting a cumulative credit of
// peer-opened streams.
func AppendMaxStreams(dst []byte, credit uint32) ([]byte, error) {
	return appendFrame(dst, Header{Type: TypeMaxStreams, Arg: credit}, nil)
}
