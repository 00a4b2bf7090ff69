package conformance

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/wsmux/wsmux/frame"
)

// The conversation format of testdata/vectors/conversations.json; its
// README.md is the reference. Stream ids are written for the runner in the
// client role (it opens odd ids); in the server role every non-zero stream
// id, in frames it sends and in frames it expects, maps odd n <-> n+1.

// File is a conversations file.
type File struct {
	Version       int            `json:"version"`
	Description   string         `json:"description,omitempty"`
	Conversations []Conversation `json:"conversations"`
}

// Conversation is one scripted session: one check.
type Conversation struct {
	Name    string `json:"name"`
	Section string `json:"section"` // section of docs/spec/wsmux-v1.md
	Rule    string `json:"rule"`
	// Needs lists what the check requires: "echo" (the application behind
	// the peer echoes each stream it accepts, then half-closes after the
	// runner's FIN), "slow" (waits for a peer timer), "server" (the peer
	// is a server: the runner dials).
	Needs []string `json:"needs,omitempty"`
	// Settings override the runner's SETTINGS (names as in the spec).
	Settings map[string]uint32 `json:"settings,omitempty"`
	// NoPreface: the runner does not send SETTINGS first by itself.
	NoPreface bool `json:"no_preface,omitempty"`
	// ManualCredit: the runner returns no flow-control credit by itself.
	ManualCredit bool `json:"manual_credit,omitempty"`
	// Offer replaces the subprotocols the runner offers; the server must
	// then refuse the upgrade (server role only).
	Offer []string `json:"offer,omitempty"`
	Steps []Step   `json:"steps"`
}

// Step is one action or expectation; exactly one field is set (Timeout
// may accompany any).
type Step struct {
	Send        *Send       `json:"send,omitempty"`
	SendData    *SendData   `json:"send_data,omitempty"`
	Expect      *Match      `json:"expect,omitempty"`
	ExpectOneOf []Match     `json:"expect_one_of,omitempty"`
	ExpectData  *DataExp    `json:"expect_data,omitempty"`
	ExpectEnd   *EndExp     `json:"expect_end,omitempty"`
	Alive       *Alive      `json:"alive,omitempty"`
	WSPing      *string     `json:"ws_ping,omitempty"`
	RapidReset  *RapidReset `json:"rapid_reset,omitempty"`
	// Timeout (a Go duration such as "40s") bounds this step instead of
	// the runner's per-check timeout.
	Timeout string `json:"timeout,omitempty"`
}

// Send writes one WebSocket message.
type Send struct {
	Hex    string      `json:"hex,omitempty"`    // frames as bytes
	Frames []FrameSpec `json:"frames,omitempty"` // or frames built at run time
	Opcode int         `json:"opcode,omitempty"` // WebSocket opcode; default 2 (binary)
	RSV    int         `json:"rsv,omitempty"`    // RSV bits of the first WebSocket frame
	// WrongMask: a client sends unmasked, a server masked.
	WrongMask bool `json:"wrong_mask,omitempty"`
	// Fragments splits the message into this many WebSocket frames.
	Fragments int `json:"fragments,omitempty"`
	// PingInside puts a WebSocket ping between the first two fragments.
	PingInside bool `json:"ping_inside,omitempty"`
	// Partial sends the header declaring the whole message but only this
	// many payload bytes (the rest never comes).
	Partial int `json:"partial,omitempty"`
	// DeclareLen sends only a WebSocket header declaring this payload
	// length (an expression) and no payload.
	DeclareLen json.RawMessage `json:"declare_len,omitempty"`
	// Fit: SKIP the check when the message is larger than the peer's
	// MAX_MESSAGE_SIZE (the step cannot be played against this peer).
	Fit bool `json:"fit,omitempty"`
}

// FrameSpec is a frame built at run time. Numbers are JSON numbers or
// expressions over the peer's settings (see eval).
type FrameSpec struct {
	Type    string          `json:"type"`
	Flags   string          `json:"flags,omitempty"` // "SYN|FIN"
	Stream  json.RawMessage `json:"stream,omitempty"`
	Arg     json.RawMessage `json:"arg,omitempty"` // number, expression or error code name
	Hex     string          `json:"hex,omitempty"`
	Text    string          `json:"text,omitempty"`
	Headers [][2]string     `json:"headers,omitempty"` // raw header block fields
	// Zeros is a payload of this many zero bytes in one frame (SKIP when
	// over 65535, which no Length can carry).
	Zeros json.RawMessage `json:"zeros,omitempty"`
	// Open puts a HEADERS SYN before the DATA of each stream Len is
	// spread over.
	Open bool `json:"open,omitempty"`
	// Len: DATA of this many pattern bytes, split into frames of at most
	// the peer's MAX_DATA_PAYLOAD.
	Len json.RawMessage `json:"len,omitempty"`
	// Spread: DATA of Len is spread over consecutive streams of the
	// runner's parity from Stream, at most the peer's
	// INITIAL_STREAM_WINDOW each.
	Spread bool            `json:"spread,omitempty"`
	Repeat json.RawMessage `json:"repeat,omitempty"` // emit the frame this many times
}

// SendData sends pattern bytes on a stream within the credit the peer
// granted, waiting for its WINDOW_UPDATEs when credit runs out.
type SendData struct {
	Stream json.RawMessage `json:"stream"`
	Len    json.RawMessage `json:"len"`
	Fin    bool            `json:"fin,omitempty"`
	// SessionOnly heeds only the session credit: for DATA on a stream the
	// peer has closed, which it must discard and credit back.
	SessionOnly bool `json:"session_only,omitempty"`
}

// Match selects a received frame. Unset fields match anything; Flags
// must all be set in the frame.
type Match struct {
	Type   string          `json:"type"`
	Flags  string          `json:"flags,omitempty"`
	Stream json.RawMessage `json:"stream,omitempty"`
	Arg    json.RawMessage `json:"arg,omitempty"`
}

// DataExp waits for DATA on a stream.
type DataExp struct {
	Stream  json.RawMessage `json:"stream"`
	Hex     string          `json:"hex,omitempty"`
	Text    string          `json:"text,omitempty"`
	Len     json.RawMessage `json:"len,omitempty"`     // with Pattern: this many pattern bytes
	Pattern bool            `json:"pattern,omitempty"` // the bytes the runner sent on the stream (echo)
	Fin     bool            `json:"fin,omitempty"`     // then the peer's FIN
}

// EndExp expects the session to end: GOAWAY with Goaway (when set) and a
// WebSocket close with one of Close (when set). Unless NoBarrier, the
// runner first sends a PING: an answer to it means the peer accepted what
// it had to reject. NoGoaway: the peer must end it without a GOAWAY of its
// own (the end of a drain, the answer to an error GOAWAY).
type EndExp struct {
	Goaway    string `json:"goaway,omitempty"`
	Close     []int  `json:"close,omitempty"`
	NoBarrier bool   `json:"no_barrier,omitempty"`
	NoGoaway  bool   `json:"no_goaway,omitempty"`
}

// Alive sends a PING and expects its ACK: the session survived what came
// before. Frames matching Forbid must not arrive before the ACK.
type Alive struct {
	Forbid []Match `json:"forbid,omitempty"`
}

// RapidReset opens and at once resets Count streams, as fast as the
// peer's stream credit allows, and stops at the peer's GOAWAY.
type RapidReset struct {
	Count int `json:"count"`
}

// Setting names of the spec, by id.
var settingNames = map[string]frame.SettingID{
	"MAX_DATA_PAYLOAD":       frame.SettingMaxDataPayload,
	"MAX_HEADER_BYTES":       frame.SettingMaxHeaderBytes,
	"INITIAL_STREAM_WINDOW":  frame.SettingInitialStreamWindow,
	"INITIAL_SESSION_WINDOW": frame.SettingInitialSessionWindow,
	"INITIAL_MAX_STREAMS":    frame.SettingInitialMaxStreams,
	"MAX_MESSAGE_SIZE":       frame.SettingMaxMessageSize,
	"KEEPALIVE_HINT_MS":      frame.SettingKeepAliveHintMS,
	"FEATURES":               frame.SettingFeatures,
}

// defaultSettings are the values a peer has until its SETTINGS say
// otherwise (spec section 6.2).
var defaultSettings = map[frame.SettingID]uint32{
	frame.SettingMaxDataPayload:       16384,
	frame.SettingMaxHeaderBytes:       8192,
	frame.SettingInitialStreamWindow:  262144,
	frame.SettingInitialSessionWindow: 1048576,
	frame.SettingInitialMaxStreams:    100,
	frame.SettingMaxMessageSize:       1048576,
}

var typeNames = map[string]frame.Type{}

var flagNames = map[string]frame.Flags{"FIN": frame.FlagFIN, "SYN": frame.FlagSYN, "ACK": frame.FlagACK}

var codeNames = map[string]frame.ErrorCode{}

func init() {
	for t := frame.Type(0); t < 9; t++ {
		typeNames[t.String()] = t
	}
	for c := frame.ErrorCode(0); c <= frame.MemoryLimit; c++ {
		if s := c.String(); !strings.HasPrefix(s, "UNKNOWN") {
			codeNames[s] = c
		}
	}
}

// parseType accepts a type name or a number (unknown types).
func parseType(s string) (frame.Type, error) {
	if t, ok := typeNames[s]; ok {
		return t, nil
	}
	n, err := strconv.ParseUint(s, 0, 8)
	if err != nil {
		return 0, fmt.Errorf("unknown frame type %q", s)
	}
	return frame.Type(n), nil
}

// parseFlags accepts "SYN|FIN" and numbers ("0x80").
func parseFlags(s string) (frame.Flags, error) {
	var f frame.Flags
	if s == "" {
		return 0, nil
	}
	for _, p := range strings.Split(s, "|") {
		p = strings.TrimSpace(p)
		if v, ok := flagNames[p]; ok {
			f |= v
			continue
		}
		n, err := strconv.ParseUint(p, 0, 8)
		if err != nil {
			return 0, fmt.Errorf("unknown flag %q", p)
		}
		f |= frame.Flags(n)
	}
	return f, nil
}

// eval evaluates a JSON number or an expression string: terms joined by
// + and -, each an integer, a name or k*name. Names are the peer's
// settings (spec names), error code names and OUR_<setting> for the
// runner's own.
func (s *session) eval(raw json.RawMessage) (int64, error) {
	if len(raw) == 0 {
		return 0, nil
	}
	var n int64
	if err := json.Unmarshal(raw, &n); err == nil {
		return n, nil
	}
	var expr string
	if err := json.Unmarshal(raw, &expr); err != nil {
		return 0, fmt.Errorf("bad number %s", raw)
	}
	expr = strings.ReplaceAll(expr, " ", "")
	var total int64
	sign := int64(1)
	for len(expr) > 0 {
		i := strings.IndexAny(expr[1:], "+-") + 1
		term := expr
		if i > 0 {
			term, expr = expr[:i], expr[i:]
		} else {
			expr = ""
		}
		switch term[0] {
		case '+':
			sign, term = 1, term[1:]
		case '-':
			sign, term = -1, term[1:]
		}
		k := int64(1)
		if j := strings.IndexByte(term, '*'); j >= 0 {
			v, err := strconv.ParseInt(term[:j], 0, 64)
			if err != nil {
				return 0, fmt.Errorf("bad factor in %q", term)
			}
			k, term = v, term[j+1:]
		}
		v, err := s.value(term)
		if err != nil {
			return 0, err
		}
		total += sign * k * v
	}
	return total, nil
}

func (s *session) value(name string) (int64, error) {
	if v, err := strconv.ParseInt(name, 0, 64); err == nil {
		return v, nil
	}
	if c, ok := codeNames[name]; ok {
		return int64(c), nil
	}
	if strings.HasPrefix(name, "OUR_") {
		if id, ok := settingNames[name[4:]]; ok {
			return int64(s.ours[id]), nil
		}
	}
	if id, ok := settingNames[name]; ok {
		return int64(s.peerSetting(id)), nil
	}
	return 0, errors.New("unknown name " + name)
}
