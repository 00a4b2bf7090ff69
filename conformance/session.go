package conformance

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/gobwas/ws"

	"github.com/wsmux/wsmux/frame"
)

// session plays one conversation over one connection.
type session struct {
	w      *wsConn
	client bool
	conv   *Conversation
	open   http.Header // header block of the streams the runner opens

	ours      map[frame.SettingID]uint32
	peer      map[frame.SettingID]uint32
	gotPeer   bool // the peer's SETTINGS arrived
	lim       frame.Limits
	deadline  time.Time
	stepLimit time.Time

	// What we granted the peer (it sends DATA against it).
	recvStream map[uint32]int64
	recvSess   int64
	owedStream map[uint32]int64 // credit to return (auto credit)
	owedSess   int64
	// What the peer granted us.
	sendStream map[uint32]int64
	sendSess   int64
	peerCredit int64 // cumulative MAX_STREAMS credit for our streams

	sent    map[uint32]int    // pattern bytes sent per stream
	taken   map[uint32]int    // pattern bytes received and matched per stream
	data    map[uint32][]byte // DATA received, not yet taken by an expectation
	fin     map[uint32]bool
	queue   []frame.Frame // frames received, not yet matched
	goaway  *frame.Frame
	lastSyn uint32
	// quiet stops the runner's own writes (PING answers, credit): before
	// its SETTINGS went out, and after a message it left incomplete.
	quiet   bool
	pingSeq uint32
}

// skip ends a check as SKIP.
type skip struct{ reason string }

func (s *skip) Error() string { return s.reason }

// failure ends a check as FAIL.
type failure struct{ msg string }

func (f *failure) Error() string { return f.msg }

func failf(format string, a ...any) error { return &failure{fmt.Sprintf(format, a...)} }

func newSession(w *wsConn, client bool, conv *Conversation, open http.Header, deadline time.Time) (*session, error) {
	s := &session{
		w: w, client: client, conv: conv, open: open, deadline: deadline,
		ours:       map[frame.SettingID]uint32{},
		peer:       map[frame.SettingID]uint32{},
		recvStream: map[uint32]int64{},
		owedStream: map[uint32]int64{},
		sendStream: map[uint32]int64{},
		sent:       map[uint32]int{},
		taken:      map[uint32]int{},
		data:       map[uint32][]byte{},
		fin:        map[uint32]bool{},
	}
	for id, v := range defaultSettings {
		s.ours[id] = v
	}
	for name, v := range conv.Settings {
		id, ok := settingNames[name]
		if !ok {
			return nil, fmt.Errorf("unknown setting %q", name)
		}
		s.ours[id] = v
	}
	s.lim = frame.Limits{MaxDataPayload: int(s.ours[frame.SettingMaxDataPayload]), Block: frame.DefaultBlockLimits()}
	s.lim.Block.MaxBytes = int(s.ours[frame.SettingMaxHeaderBytes])
	s.recvSess = int64(s.ours[frame.SettingInitialSessionWindow])
	s.quiet = conv.NoPreface
	return s, nil
}

func (s *session) peerSetting(id frame.SettingID) uint32 {
	if v, ok := s.peer[id]; ok {
		return v
	}
	return defaultSettings[id]
}

// sid maps a stream id of the vectors (client role) to this role.
func (s *session) sid(id uint32) uint32 {
	if s.client || id == 0 {
		return id
	}
	if id&1 == 1 {
		return id + 1
	}
	return id - 1
}

func (s *session) local(id uint32) bool { return id != 0 && (id&1 == 1) == s.client }

// preface sends the runner's SETTINGS.
func (s *session) preface() error {
	var set frame.Settings
	ids := make([]frame.SettingID, 0, len(s.ours))
	for id := range s.ours {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		if err := set.Set(id, s.ours[id]); err != nil {
			return fmt.Errorf("runner setting %d=%d: %w", id, s.ours[id], err)
		}
	}
	return s.sendMsg(frame.AppendSettings(nil, &set))
}

func (s *session) sendMsg(b []byte) error {
	return s.w.writeFrame(ws.OpBinary, true, 0, b, false)
}

// noteSent does the runner's own accounting of frames it sends.
func (s *session) noteSent(b []byte) {
	for len(b) >= frame.HeaderSize {
		h := frame.Header{
			Type: frame.Type(b[0]), Flags: frame.Flags(b[1]), Length: binary.BigEndian.Uint16(b[2:]),
			StreamID: binary.BigEndian.Uint32(b[4:]), Arg: binary.BigEndian.Uint32(b[8:]),
		}
		n := frame.HeaderSize + int(h.Length)
		if n > len(b) {
			return
		}
		switch h.Type {
		case frame.TypeData:
			s.credit(h.StreamID)
			s.sendStream[h.StreamID] -= int64(h.Length)
			s.sendSess -= int64(h.Length)
		case frame.TypeHeaders:
			if h.Flags.Has(frame.FlagSYN) {
				s.credit(h.StreamID)
				if _, ok := s.recvStream[h.StreamID]; !ok {
					s.recvStream[h.StreamID] = int64(s.ours[frame.SettingInitialStreamWindow])
				}
			}
		case frame.TypeSettings:
			s.quiet = false
		case frame.TypeWindowUpdate:
			if h.StreamID == 0 {
				s.recvSess += int64(h.Arg)
			} else {
				s.recvStream[h.StreamID] += int64(h.Arg)
			}
		}
		b = b[n:]
	}
}

// credit initialises our send credit of a stream from the peer's settings.
func (s *session) credit(id uint32) {
	if _, ok := s.sendStream[id]; !ok {
		s.sendStream[id] = int64(s.peerSetting(frame.SettingInitialStreamWindow))
	}
}

// next reads one message and applies it: the invariants every peer keeps
// in every conversation, the bookkeeping, PING answers and credit.
func (s *session) next() error {
	limit := s.deadline
	if !s.stepLimit.IsZero() {
		limit = s.stepLimit
	}
	_ = s.w.c.SetReadDeadline(limit)
	op, msg, err := s.w.readMessage(int(s.ours[frame.SettingMaxMessageSize]))
	if err != nil {
		return err
	}
	if op == ws.OpPong {
		return nil
	}
	var it frame.Iterator
	it.Reset(msg, s.lim)
	var out []byte
	for it.Next() {
		f := it.Frame()
		f.Payload = bytes.Clone(f.Payload)
		if err := s.apply(&f); err != nil {
			return err
		}
		if f.Type == frame.TypePing && !f.Flags.Has(frame.FlagACK) {
			out = frame.AppendPing(out, true, f.Arg)
		}
		if f.Type == frame.TypeData {
			f.Payload = nil // the bytes are kept per stream in s.data
		}
		s.queue = append(s.queue, f)
	}
	if err := it.Err(); err != nil {
		return &violation{"3", "the peer sent a frame that breaks the codec rules: " + err.Error()}
	}
	if !s.conv.ManualCredit {
		for id, n := range s.owedStream {
			if n > 0 && !s.fin[id] {
				out, _ = frame.AppendWindowUpdate(out, id, uint32(n))
			}
			delete(s.owedStream, id)
		}
		if s.owedSess > 0 {
			out, _ = frame.AppendWindowUpdate(out, 0, uint32(s.owedSess))
			s.owedSess = 0
		}
	}
	if len(out) > 0 && !s.quiet {
		s.noteSent(out)
		_ = s.sendMsg(out) // a failed write shows on the next read, with the peer's close

	}
	return nil
}

func (s *session) apply(f *frame.Frame) error {
	if !s.gotPeer {
		if f.Type != frame.TypeSettings {
			return &violation{"6.1", "the peer's first frame is " + f.Type.String() + ", not SETTINGS"}
		}
		s.gotPeer = true
		var set frame.Settings
		if err := frame.ParseSettings(f.Payload, &set); err != nil {
			return &violation{"6.2", "the peer's SETTINGS: " + err.Error()}
		}
		for i := 0; i < set.Len(); i++ {
			e := set.At(i)
			s.peer[e.ID] = e.Value
		}
		s.sendSess = int64(s.peerSetting(frame.SettingInitialSessionWindow))
		s.peerCredit = int64(s.peerSetting(frame.SettingInitialMaxStreams))
		for id := range s.sendStream {
			s.sendStream[id] = int64(s.peerSetting(frame.SettingInitialStreamWindow))
		}
		return nil
	}
	if s.goaway != nil && s.goaway.Code() != frame.NoError {
		return &violation{"9.5", fmt.Sprintf("the peer sent %s after its GOAWAY %s", f.Type, s.goaway.Code())}
	}
	switch f.Type {
	case frame.TypeSettings:
		return &violation{"6.1", "the peer sent a second SETTINGS"}
	case frame.TypeData:
		n := int64(len(f.Payload))
		if s.fin[f.StreamID] {
			return &violation{"7.5", fmt.Sprintf("the peer sent DATA on stream %d after its FIN", f.StreamID)}
		}
		if _, ok := s.recvStream[f.StreamID]; !ok {
			s.recvStream[f.StreamID] = int64(s.ours[frame.SettingInitialStreamWindow])
		}
		s.recvStream[f.StreamID] -= n
		s.recvSess -= n
		if s.recvStream[f.StreamID] < 0 {
			return &violation{"8.3", fmt.Sprintf("the peer sent DATA on stream %d beyond the stream window we granted", f.StreamID)}
		}
		if s.recvSess < 0 {
			return &violation{"8.3", "the peer sent DATA beyond the session window we granted"}
		}
		s.data[f.StreamID] = append(s.data[f.StreamID], f.Payload...)
		s.owedStream[f.StreamID] += n
		s.owedSess += n
		if f.Flags.Has(frame.FlagFIN) {
			s.fin[f.StreamID] = true
		}
	case frame.TypeHeaders:
		if f.Flags.Has(frame.FlagSYN) {
			switch {
			case s.local(f.StreamID):
				return &violation{"7.1", fmt.Sprintf("the peer opened stream %d with the runner's parity", f.StreamID)}
			case f.StreamID <= s.lastSyn:
				return &violation{"7.1", fmt.Sprintf("the peer opened stream %d after %d: ids must increase", f.StreamID, s.lastSyn)}
			case int64((f.StreamID+1)/2) > int64(s.ours[frame.SettingInitialMaxStreams]):
				return &violation{"7.3", fmt.Sprintf("the peer opened stream %d beyond the stream credit we granted", f.StreamID)}
			}
			s.lastSyn = f.StreamID
			s.recvStream[f.StreamID] = int64(s.ours[frame.SettingInitialStreamWindow])
		}
		if f.Flags.Has(frame.FlagFIN) {
			s.fin[f.StreamID] = true
		}
	case frame.TypeWindowUpdate:
		if f.StreamID == 0 {
			s.sendSess += int64(f.Arg)
		} else {
			s.credit(f.StreamID)
			s.sendStream[f.StreamID] += int64(f.Arg)
		}
	case frame.TypeMaxStreams:
		s.peerCredit = max(s.peerCredit, int64(f.Arg))
	case frame.TypeGoAway:
		if s.goaway == nil || f.Code() != frame.NoError {
			g := *f
			s.goaway = &g
		}
	}
	return nil
}

// readUntil reads until pick returns true for a frame of the queue (which
// it then removes) or the connection ends.
func (s *session) readUntil(what string, pick func(*frame.Frame) bool) (*frame.Frame, error) {
	for {
		for i := range s.queue {
			if pick(&s.queue[i]) {
				f := s.queue[i]
				s.queue = append(s.queue[:i], s.queue[i+1:]...)
				return &f, nil
			}
		}
		if err := s.next(); err != nil {
			return nil, s.explain(what, err)
		}
	}
}

// explain turns a read error into a check failure.
func (s *session) explain(what string, err error) error {
	var v *violation
	if errors.As(err, &v) {
		return failf("peer breaks §%s: %s", v.section, v.msg)
	}
	if errors.Is(err, errEnded) {
		msg := "the connection ended while waiting for " + what
		if s.goaway != nil {
			msg += fmt.Sprintf(" (peer GOAWAY %s %q)", s.goaway.Code(), s.goaway.Payload)
		}
		if s.w.closeCode >= 0 {
			msg += fmt.Sprintf(" (WebSocket close %d)", s.w.closeCode)
		}
		return failf("%s", msg)
	}
	return failf("timed out waiting for %s", what)
}

func (s *session) match(m *Match) (func(*frame.Frame) bool, string, error) {
	t, err := parseType(m.Type)
	if err != nil {
		return nil, "", err
	}
	fl, err := parseFlags(m.Flags)
	if err != nil {
		return nil, "", err
	}
	desc := m.Type
	if fl != 0 {
		desc += "(" + m.Flags + ")"
	}
	var id uint32
	hasID := len(m.Stream) > 0
	if hasID {
		v, err := s.eval(m.Stream)
		if err != nil {
			return nil, "", err
		}
		id = s.sid(uint32(v))
		desc += fmt.Sprintf(" on stream %d", id)
	}
	var arg uint32
	hasArg := len(m.Arg) > 0
	if hasArg {
		v, err := s.eval(m.Arg)
		if err != nil {
			return nil, "", err
		}
		arg = uint32(v)
		if t == frame.TypeRSTStream || t == frame.TypeGoAway || t == frame.TypeStopSending {
			desc += " " + frame.ErrorCode(arg).String()
		} else {
			desc += fmt.Sprintf(" arg %d", arg)
		}
	}
	return func(f *frame.Frame) bool {
		return f.Type == t && f.Flags.Has(fl) && (!hasID || f.StreamID == id) && (!hasArg || f.Arg == arg)
	}, desc, nil
}

// build encodes a FrameSpec, valid or not.
func (s *session) build(dst []byte, fs *FrameSpec) ([]byte, error) {
	t, err := parseType(fs.Type)
	if err != nil {
		return nil, err
	}
	fl, err := parseFlags(fs.Flags)
	if err != nil {
		return nil, err
	}
	sv, err := s.eval(fs.Stream)
	if err != nil {
		return nil, err
	}
	id := s.sid(uint32(sv))
	arg, err := s.eval(fs.Arg)
	if err != nil {
		return nil, err
	}
	repeat, err := s.eval(fs.Repeat)
	if err != nil {
		return nil, err
	}
	if repeat == 0 {
		repeat = 1
	}
	n, err := s.eval(fs.Len)
	if err != nil {
		return nil, err
	}
	if t == frame.TypeData && len(fs.Len) > 0 {
		return s.buildData(dst, id, fl, int(n), fs.Spread, fs.Open), nil
	}
	var payload []byte
	switch {
	case len(fs.Zeros) > 0:
		z, err := s.eval(fs.Zeros)
		if err != nil {
			return nil, err
		}
		if z > frame.MaxPayload {
			return nil, &skip{fmt.Sprintf("needs a %d-byte payload, more than a frame can carry: the peer's limit cannot be crossed", z)}
		}
		payload = make([]byte, z)
	case fs.Hex != "":
		if payload, err = hex.DecodeString(fs.Hex); err != nil {
			return nil, err
		}
	case fs.Text != "":
		payload = []byte(fs.Text)
	case fs.Headers != nil:
		for _, h := range fs.Headers {
			payload = append(payload, byte(len(h[0])))
			payload = append(payload, h[0]...)
			payload = binary.BigEndian.AppendUint16(payload, uint16(len(h[1])))
			payload = append(payload, h[1]...)
		}
	case t == frame.TypeHeaders && fl.Has(frame.FlagSYN):
		lim := frame.BlockLimits{MaxBytes: 65535, MaxFields: 1024, MaxName: 255, MaxValue: 65535}
		if payload, err = frame.AppendHeaderBlock(nil, s.open, &lim); err != nil {
			return nil, err
		}
	}
	for range repeat {
		dst = frame.AppendHeader(dst, frame.Header{Type: t, Flags: fl, Length: uint16(len(payload)), StreamID: id, Arg: uint32(arg)})
		dst = append(dst, payload...)
	}
	return dst, nil
}

// buildData appends n pattern bytes as DATA frames on stream id or, with
// spread, on streams id, id+2... (each at most the peer's stream window);
// with open, each stream's DATA follows a HEADERS SYN.
func (s *session) buildData(dst []byte, id uint32, fl frame.Flags, n int, spread, open bool) []byte {
	per := n
	if spread {
		per = max(int(s.peerSetting(frame.SettingInitialStreamWindow)), 1)
	}
	maxData := int(s.peerSetting(frame.SettingMaxDataPayload))
	for first := true; first || n > 0; first = false {
		if open {
			dst, _ = s.build(dst, &FrameSpec{Type: "HEADERS", Flags: "SYN", Stream: num(s.sid(id))})
		}
		left := min(per, n)
		n -= left
		for left > 0 || fl.Has(frame.FlagFIN) {
			c := min(left, maxData)
			left -= c
			f := frame.Flags(0)
			if left == 0 {
				f = fl
			}
			dst = frame.AppendHeader(dst, frame.Header{Type: frame.TypeData, Flags: f, Length: uint16(c), StreamID: id, Arg: 0})
			dst = s.pattern(dst, id, c)
			if left == 0 {
				break
			}
		}
		id += 2
	}
	return dst
}

// pattern appends the next n bytes of the stream's pattern.
func (s *session) pattern(dst []byte, id uint32, n int) []byte {
	off := s.sent[id]
	for i := range n {
		dst = append(dst, patternByte(off+i))
	}
	s.sent[id] = off + n
	return dst
}

func patternByte(i int) byte { return byte(i%251) ^ 0x5a }

// swapHex rewrites the stream ids of the frames in b for the server role.
func (s *session) swapHex(b []byte) []byte {
	if s.client {
		return b
	}
	out := bytes.Clone(b)
	for p := out; len(p) >= frame.HeaderSize; {
		id := binary.BigEndian.Uint32(p[4:])
		binary.BigEndian.PutUint32(p[4:], s.sid(id&0x7fffffff)|id&0x80000000)
		n := frame.HeaderSize + int(binary.BigEndian.Uint16(p[2:]))
		if n > len(p) {
			break
		}
		p = p[n:]
	}
	return out
}
