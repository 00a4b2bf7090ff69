package conformance

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gobwas/ws"

	"github.com/wsmux/wsmux/frame"
)

// barrierBase marks the opaque values of the runner's barrier PINGs.
const barrierBase = 0x7c000000

// play runs the conversation's steps.
func (s *session) play(stepTimeout time.Duration) error {
	if !s.conv.NoPreface {
		if err := s.preface(); err != nil {
			return err
		}
	}
	for i := range s.conv.Steps {
		st := &s.conv.Steps[i]
		s.stepLimit = time.Time{}
		if st.Timeout != "" {
			d, err := time.ParseDuration(st.Timeout)
			if err != nil {
				return fmt.Errorf("step %d: %w", i+1, err)
			}
			s.stepLimit = time.Now().Add(d)
		} else if stepTimeout > 0 {
			s.stepLimit = time.Now().Add(stepTimeout)
			if s.deadline.Before(s.stepLimit) {
				s.stepLimit = s.deadline
			}
		}
		if err := s.step(st); err != nil {
			var f *failure
			var sk *skip
			if errors.As(err, &f) || errors.As(err, &sk) {
				return err
			}
			return fmt.Errorf("step %d: %w", i+1, err)
		}
	}
	return nil
}

func (s *session) step(st *Step) error {
	switch {
	case st.Send != nil:
		return s.doSend(st.Send)
	case st.SendData != nil:
		return s.doSendData(st.SendData)
	case st.Expect != nil:
		pick, desc, err := s.match(st.Expect)
		if err != nil {
			return err
		}
		_, err = s.readUntil(desc, pick)
		return err
	case len(st.ExpectOneOf) > 0:
		var picks []func(*frame.Frame) bool
		var descs []string
		for i := range st.ExpectOneOf {
			pick, desc, err := s.match(&st.ExpectOneOf[i])
			if err != nil {
				return err
			}
			picks, descs = append(picks, pick), append(descs, desc)
		}
		_, err := s.readUntil(strings.Join(descs, " or "), func(f *frame.Frame) bool {
			return slices.ContainsFunc(picks, func(p func(*frame.Frame) bool) bool { return p(f) })
		})
		return err
	case st.ExpectData != nil:
		return s.doExpectData(st.ExpectData)
	case st.ExpectEnd != nil:
		return s.doExpectEnd(st.ExpectEnd)
	case st.Alive != nil:
		return s.doAlive(st.Alive)
	case st.WSPing != nil:
		return s.doWSPing(*st.WSPing)
	case st.RapidReset != nil:
		return s.doRapidReset(st.RapidReset.Count)
	}
	return errors.New("empty step")
}

// awaitSettings reads until the peer's SETTINGS arrived: frames built from
// its settings need them.
func (s *session) awaitSettings() error {
	for !s.gotPeer {
		if err := s.next(); err != nil {
			return s.explain("the peer's SETTINGS", err)
		}
	}
	return nil
}

func (s *session) doSend(sd *Send) error {
	var msg []byte
	switch {
	case sd.Hex != "":
		b, err := hex.DecodeString(sd.Hex)
		if err != nil {
			return err
		}
		msg = s.swapHex(b)
	case len(sd.Frames) > 0:
		if err := s.awaitSettings(); err != nil {
			return err
		}
		for i := range sd.Frames {
			var err error
			if msg, err = s.build(msg, &sd.Frames[i]); err != nil {
				return err
			}
		}
	}
	if len(sd.DeclareLen) > 0 {
		if err := s.awaitSettings(); err != nil {
			return err
		}
		n, err := s.eval(sd.DeclareLen)
		if err != nil {
			return err
		}
		return s.w.writeHeaderOnly(n, nil)
	}
	if sd.Fit && len(msg) > int(s.peerSetting(frame.SettingMaxMessageSize)) {
		return &skip{fmt.Sprintf("needs a %d-byte message; the peer's MAX_MESSAGE_SIZE is %d", len(msg), s.peerSetting(frame.SettingMaxMessageSize))}
	}
	s.noteSent(msg)
	if sd.Partial > 0 {
		s.quiet = true
		return s.w.writeHeaderOnly(int64(len(msg)), msg[:min(sd.Partial, len(msg))])
	}
	op := ws.OpBinary
	if sd.Opcode != 0 {
		op = ws.OpCode(sd.Opcode)
	}
	parts := max(sd.Fragments, 1)
	size := (len(msg) + parts - 1) / parts
	for i := 0; i < parts; i++ {
		chunk := msg[min(i*size, len(msg)):min((i+1)*size, len(msg))]
		o, rsv := ws.OpContinuation, byte(0)
		if i == 0 {
			o, rsv = op, byte(sd.RSV)
		}
		// A write the peer no longer takes is not judged here: the next
		// step reads why (its GOAWAY and close, or the end of the connection).
		if err := s.w.writeFrame(o, i == parts-1, rsv, chunk, sd.WrongMask); err != nil {
			return nil
		}
		if i == 0 && sd.PingInside {
			if err := s.w.writeFrame(ws.OpPing, true, 0, []byte("inside"), false); err != nil {
				return nil
			}
		}
	}
	return nil
}

func (s *session) doSendData(sd *SendData) error {
	if err := s.awaitSettings(); err != nil {
		return err
	}
	v, err := s.eval(sd.Stream)
	if err != nil {
		return err
	}
	id := s.sid(uint32(v))
	n, err := s.eval(sd.Len)
	if err != nil {
		return err
	}
	s.credit(id)
	left := int(n)
	chunk := min(int(s.peerSetting(frame.SettingMaxMessageSize))/2, 256<<10)
	for left > 0 {
		avail := min(int64(left), s.sendSess, int64(chunk))
		if !sd.SessionOnly {
			avail = min(avail, s.sendStream[id])
		}
		if avail <= 0 {
			// Out of credit: the peer must return some as its application
			// reads (an echo reads everything).
			if !sd.SessionOnly {
				for _, f := range s.queue {
					if f.Type == frame.TypeRSTStream && f.StreamID == id {
						return failf("the peer reset stream %d (%s %q) while the runner was sending on it", id, f.Code(), f.Payload)
					}
				}
			}
			if err := s.next(); err != nil {
				return s.explain(fmt.Sprintf("WINDOW_UPDATE for stream %d or the session (§8.4)", id), err)
			}
			continue
		}
		fl := frame.Flags(0)
		if sd.Fin && int(avail) == left {
			fl = frame.FlagFIN
		}
		msg := s.buildData(nil, id, fl, int(avail), false, false)
		s.noteSent(msg)
		if err := s.sendMsg(msg); err != nil {
			return nil // the next step reads why
		}
		left -= int(avail)
	}
	if sd.Fin && n == 0 {
		msg, _ := frame.AppendData(nil, id, true, nil)
		return s.sendMsg(msg)
	}
	return nil
}

func (s *session) doExpectData(de *DataExp) error {
	v, err := s.eval(de.Stream)
	if err != nil {
		return err
	}
	id := s.sid(uint32(v))
	var want []byte
	switch {
	case de.Hex != "":
		if want, err = hex.DecodeString(de.Hex); err != nil {
			return err
		}
	case de.Text != "":
		want = []byte(de.Text)
	case de.Pattern:
		n, err := s.eval(de.Len)
		if err != nil {
			return err
		}
		for i := range int(n) {
			want = append(want, patternByte(s.taken[id]+i))
		}
	}
	for len(s.data[id]) < len(want) || (de.Fin && !s.fin[id]) {
		if s.fin[id] && len(s.data[id]) < len(want) {
			return failf("stream %d: the peer's FIN came after %d bytes, want %d", id, len(s.data[id]), len(want))
		}
		if err := s.next(); err != nil {
			what := fmt.Sprintf("%d bytes of DATA on stream %d (have %d)", len(want), id, len(s.data[id]))
			if de.Fin && len(s.data[id]) >= len(want) {
				what = fmt.Sprintf("the peer's FIN on stream %d", id)
			}
			return s.explain(what, err)
		}
	}
	got := s.data[id][:len(want)]
	if !bytes.Equal(got, want) {
		i := 0
		for i < len(got) && got[i] == want[i] {
			i++
		}
		return failf("stream %d: DATA differs from what was expected at byte %d", id, i)
	}
	s.data[id] = s.data[id][len(want):]
	s.taken[id] += len(want)
	if de.Fin && len(s.data[id]) > 0 {
		return failf("stream %d: %d bytes more than expected before the FIN", id, len(s.data[id]))
	}
	return nil
}

// barrier sends a PING the runner recognises and returns its opaque.
func (s *session) barrier() (uint32, error) {
	s.pingSeq++
	op := barrierBase + s.pingSeq
	return op, s.sendMsg(frame.AppendPing(nil, false, op))
}

func (s *session) doExpectEnd(ee *EndExp) error {
	var op uint32
	if !ee.NoBarrier {
		op, _ = s.barrier() // the peer may have closed already
	}
	for {
		for _, f := range s.queue {
			if !ee.NoBarrier && f.Type == frame.TypePing && f.Flags.Has(frame.FlagACK) && f.Arg == op {
				return failf("the peer answered a PING sent after the violation: it accepted what it must reject (want GOAWAY %s)", orAny(ee.Goaway))
			}
		}
		s.queue = s.queue[:0]
		if err := s.next(); err != nil {
			var v *violation
			if errors.As(err, &v) {
				return failf("peer breaks §%s: %s", v.section, v.msg)
			}
			if !errors.Is(err, errEnded) {
				if ee.NoGoaway {
					return failf("timed out waiting for the peer to close the session")
				}
				return failf("timed out waiting for the peer to end the session (want GOAWAY %s)", orAny(ee.Goaway))
			}
			break
		}
	}
	if ee.NoGoaway && s.goaway != nil {
		return failf("the peer sent GOAWAY %s %q; it must end this session with the close alone", s.goaway.Code(), s.goaway.Payload)
	}
	if ee.Goaway != "" {
		want, ok := codeNames[ee.Goaway]
		if !ok {
			return fmt.Errorf("unknown error code %q", ee.Goaway)
		}
		switch {
		case s.goaway == nil:
			return failf("the session ended without a GOAWAY (want %s; WebSocket close %d)", ee.Goaway, s.w.closeCode)
		case s.goaway.Code() != want:
			return failf("GOAWAY %s %q, want %s", s.goaway.Code(), s.goaway.Payload, ee.Goaway)
		}
	}
	if len(ee.Close) > 0 {
		switch {
		case s.w.closeCode < 0:
			return failf("the connection ended without a WebSocket close (want %v): %v", ee.Close, s.w.endErr)
		case !slices.Contains(ee.Close, s.w.closeCode):
			return failf("WebSocket close %d, want one of %v", s.w.closeCode, ee.Close)
		}
	}
	return nil
}

func orAny(code string) string {
	if code == "" {
		return "(any code)"
	}
	return code
}

func (s *session) doAlive(a *Alive) error {
	if err := s.awaitSettings(); err != nil {
		return err
	}
	op, _ := s.barrier() // a failed write shows on the read
	if _, err := s.readUntil(fmt.Sprintf("the ACK of PING %#x (the session should have survived)", op), func(f *frame.Frame) bool {
		return f.Type == frame.TypePing && f.Flags.Has(frame.FlagACK) && f.Arg == op
	}); err != nil {
		return err
	}
	for i := range a.Forbid {
		pick, desc, err := s.match(&a.Forbid[i])
		if err != nil {
			return err
		}
		for j := range s.queue {
			if pick(&s.queue[j]) {
				return failf("the peer sent %s", desc)
			}
		}
	}
	return nil
}

func (s *session) doWSPing(h string) error {
	p, err := hex.DecodeString(h)
	if err != nil {
		return err
	}
	_ = s.w.writeFrame(ws.OpPing, true, 0, p, false) // a failed write shows on the read
	for {
		for i, q := range s.w.pongs {
			if bytes.Equal(q, p) {
				s.w.pongs = append(s.w.pongs[:i], s.w.pongs[i+1:]...)
				return nil
			}
		}
		if err := s.next(); err != nil {
			return s.explain("a WebSocket pong", err)
		}
	}
}

// doRapidReset opens and resets streams in messages as large as the
// peer's stream credit allows, until count streams or the peer's GOAWAY.
func (s *session) doRapidReset(count int) error {
	if err := s.awaitSettings(); err != nil {
		return err
	}
	id := uint32(1) // in the vectors' numbering; build maps it
	opened := 0
	for opened < count && s.goaway == nil {
		room := int(s.peerCredit) - (int(s.sid(id))+1)/2 + 1
		if room <= 0 {
			if err := s.next(); err != nil {
				if errors.Is(err, errEnded) {
					return nil // the following expectation judges the end
				}
				return s.explain("MAX_STREAMS (stream credit back after resets, §7.3)", err)
			}
			continue
		}
		var msg []byte
		for k := 0; k < min(room, count-opened, 100); k++ {
			msg, _ = s.build(msg, &FrameSpec{Type: "HEADERS", Flags: "SYN", Stream: num(id)})
			msg = frame.AppendHeader(msg, frame.Header{Type: frame.TypeRSTStream, StreamID: s.sid(id), Arg: uint32(frame.Cancel)})
			id += 2
			opened++
		}
		s.noteSent(msg)
		if err := s.sendMsg(msg); err != nil {
			return nil // the peer closed: the following expectation judges it
		}
	}
	return nil
}

// num is a JSON number for a FrameSpec built in code.
func num(id uint32) []byte { return fmt.Appendf(nil, "%d", id) }
