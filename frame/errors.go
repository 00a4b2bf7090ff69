package frame

import "strconv"

// ErrorCode is a WSMUX/1 error code, carried by RST_STREAM, STOP_SENDING and
// GOAWAY. Values match HTTP/2 (RFC 9113 section 7) where the meaning is the
// same; 0x1000-0xFFFF are left to applications.
type ErrorCode uint32

// Error codes.
const (
	NoError          ErrorCode = 0x0  // graceful end
	ProtocolError    ErrorCode = 0x1  // the peer broke a protocol rule
	InternalError    ErrorCode = 0x2  // a local failure unrelated to the peer
	FlowControlError ErrorCode = 0x3  // the peer sent past its credit, or a window overflowed
	SettingsTimeout  ErrorCode = 0x4  // no SETTINGS in time after the upgrade
	StreamClosed     ErrorCode = 0x5  // a frame for a stream already half-closed that way
	FrameSizeError   ErrorCode = 0x6  // a frame longer or shorter than its type allows
	RefusedStream    ErrorCode = 0x7  // the stream was not processed; safe to retry
	Cancel           ErrorCode = 0x8  // the stream is no longer needed
	ConnectError     ErrorCode = 0xA  // a tunnelled connection failed (port-forward), or a lost session's was refused again
	EnhanceYourCalm  ErrorCode = 0xB  // the peer exceeded an abuse budget
	StreamLimit      ErrorCode = 0x10 // a stream opened beyond the granted credit
	HeaderTooLarge   ErrorCode = 0x11 // a header block over its limits
	IdleTimeout      ErrorCode = 0x12 // no DATA or HEADERS activity for the idle timeout
	KeepaliveTimeout ErrorCode = 0x13 // nothing received for the keepalive timeout
	StallTimeout     ErrorCode = 0x14 // the peer kept us at a zero window too long
	MemoryLimit      ErrorCode = 0x15 // a memory budget was exhausted

	// FirstApplicationCode and LastApplicationCode bound the codes left to
	// applications (e.g. a port-forward target's connection reset).
	FirstApplicationCode ErrorCode = 0x1000
	LastApplicationCode  ErrorCode = 0xFFFF
)

var codeNames = [...]string{
	NoError:          "NO_ERROR",
	ProtocolError:    "PROTOCOL_ERROR",
	InternalError:    "INTERNAL_ERROR",
	FlowControlError: "FLOW_CONTROL_ERROR",
	SettingsTimeout:  "SETTINGS_TIMEOUT",
	StreamClosed:     "STREAM_CLOSED",
	FrameSizeError:   "FRAME_SIZE_ERROR",
	RefusedStream:    "REFUSED_STREAM",
	Cancel:           "CANCEL",
	ConnectError:     "CONNECT_ERROR",
	EnhanceYourCalm:  "ENHANCE_YOUR_CALM",
	StreamLimit:      "STREAM_LIMIT_ERROR",
	HeaderTooLarge:   "HEADER_TOO_LARGE",
	IdleTimeout:      "IDLE_TIMEOUT",
	KeepaliveTimeout: "KEEPALIVE_TIMEOUT",
	StallTimeout:     "STALL_TIMEOUT",
	MemoryLimit:      "MEMORY_LIMIT",
}

// String returns the code's protocol name, "APPLICATION_0x1001" for an
// application code, or "UNKNOWN_0x..." otherwise.
func (c ErrorCode) String() string {
	if int(c) < len(codeNames) && codeNames[c] != "" {
		return codeNames[c]
	}
	if c.IsApplication() {
		return "APPLICATION_0x" + strconv.FormatUint(uint64(c), 16)
	}
	return "UNKNOWN_0x" + strconv.FormatUint(uint64(c), 16)
}

// IsApplication reports whether c is in the range left to applications.
func (c ErrorCode) IsApplication() bool {
	return c >= FirstApplicationCode && c <= LastApplicationCode
}

// Error is a frame that breaks a WSMUX/1 rule. Code is the error the session
// (or, where the caller decides so, the stream) must end with; Reason names
// the rule. The package's Err... values are the only Errors it returns, so
// they can be compared with errors.Is or ==.
type Error struct {
	Code   ErrorCode
	Reason string
}

func (e *Error) Error() string { return "frame: " + e.Reason + " (" + e.Code.String() + ")" }

// The rules a frame can break, one value each.
var (
	ErrEmptyMessage      = &Error{ProtocolError, "message holds no frame"}
	ErrShortHeader       = &Error{FrameSizeError, "message ends inside a frame header"}
	ErrShortPayload      = &Error{FrameSizeError, "payload runs past the end of the message"}
	ErrUnknownType       = &Error{ProtocolError, "unknown frame type"}
	ErrUnknownFlags      = &Error{ProtocolError, "flag bits not defined for this frame type"}
	ErrReservedBit       = &Error{ProtocolError, "reserved bit 31 of the stream id is set"}
	ErrNeedStreamID      = &Error{ProtocolError, "stream frame on stream 0"}
	ErrNeedSession       = &Error{ProtocolError, "session frame on a non-zero stream"}
	ErrNonZeroArg        = &Error{ProtocolError, "reserved arg is not zero"}
	ErrPayloadNotAllowed = &Error{FrameSizeError, "payload on a frame type that has none"}
	ErrDataTooLarge      = &Error{FrameSizeError, "DATA payload over the negotiated maximum"}
	ErrEmptyData         = &Error{ProtocolError, "empty DATA frame without FIN"}
	ErrSynAndAck         = &Error{ProtocolError, "HEADERS with both SYN and ACK"}
	ErrHeadersTooLarge   = &Error{HeaderTooLarge, "HEADERS block over MaxHeaderBytes"}
	ErrZeroDelta         = &Error{ProtocolError, "WINDOW_UPDATE with a zero delta"}
	ErrDeltaTooLarge     = &Error{FlowControlError, "WINDOW_UPDATE delta over 2^31-1"}
	ErrReasonTooLong     = &Error{FrameSizeError, "RST_STREAM reason over 128 bytes"}
	ErrDebugTooLong      = &Error{FrameSizeError, "GOAWAY debug text over 256 bytes"}
	ErrNotUTF8           = &Error{ProtocolError, "reason or debug text is not UTF-8"}
	ErrSettingsLength    = &Error{FrameSizeError, "SETTINGS length not a multiple of 6 or over 16 entries"}
	ErrSettingsDuplicate = &Error{ProtocolError, "SETTINGS names one id twice"}
	ErrSettingsValue     = &Error{ProtocolError, "SETTINGS value out of range"}
	ErrCreditTooLarge    = &Error{ProtocolError, "MAX_STREAMS credit over 2^31-1"}

	ErrBlockTruncated   = &Error{ProtocolError, "header block ends inside a field"}
	ErrBlockTooLarge    = &Error{HeaderTooLarge, "header block over its byte limit"}
	ErrBlockTooMany     = &Error{HeaderTooLarge, "header block over its field count limit"}
	ErrBlockNameLength  = &Error{HeaderTooLarge, "header name empty or over its length limit"}
	ErrBlockValueLength = &Error{HeaderTooLarge, "header value over its length limit"}
	ErrBlockBadName     = &Error{ProtocolError, "header name is not a lowercase token"}
	ErrBlockBadValue    = &Error{ProtocolError, "header value holds CR, LF or NUL, or is not UTF-8"}
)
