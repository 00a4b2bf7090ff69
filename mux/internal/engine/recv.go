package engine

import (
	"errors"
	"time"

	"github.com/wsmux/wsmux/frame"
)

// The receive half of the core: one message in, state changes and queued
// answers out. Every rule that needs session state (stream id order,
// windows, credit, budgets) is enforced here; the codec checked the rest.

// Feed consumes one whole WebSocket message from the peer. It returns the
// session error when the message (or an earlier one) ended the session.
func (e *Engine) Feed(msg []byte, now time.Duration) error {
	if e.rs.suspended {
		return nil // a message of the lost connection: the peer replays it
	}
	if e.err != nil {
		if e.flushing {
			e.feedFlushing(msg)
		}
		return e.err
	}
	e.lastRecv = now
	e.stats.MessagesIn.Add(1)
	e.stats.BytesIn.Add(uint64(len(msg)))
	var it frame.Iterator
	it.Reset(msg, e.lim)
	frames := 0
	for it.Next() {
		f := it.Frame()
		frames++
		e.handle(&f, now)
		if e.err != nil {
			break
		}
		if f.Type == frame.TypeSettings && e.lim.Resume {
			it.SetLimits(e.lim) // RECEIVED may follow in this message
		}
	}
	e.stats.FramesIn.Add(uint64(frames))
	if err := it.Err(); err != nil {
		e.failFrame(err)
	}
	if e.err != nil {
		return e.err
	}
	e.countReceived(len(msg))
	return nil
}

func (e *Engine) handle(f *frame.Frame, now time.Duration) {
	if !e.gotSettings {
		if f.Type != frame.TypeSettings {
			e.fail(frame.ProtocolError, errors.New("first frame is not SETTINGS"))
			return
		}
		e.applySettings(f.Payload)
		return
	}
	switch f.Type {
	case frame.TypeData:
		e.onData(f, now)
	case frame.TypeHeaders:
		e.onHeaders(f, now)
	case frame.TypeWindowUpdate:
		e.onWindowUpdate(f, now)
	case frame.TypeRSTStream:
		e.onRST(f, now)
	case frame.TypeStopSending:
		e.onStopSending(f, now)
	case frame.TypePing:
		e.onPing(f, now)
	case frame.TypeGoAway:
		e.onGoAway(f, now)
	case frame.TypeSettings:
		e.fail(frame.ProtocolError, errors.New("second SETTINGS frame"))
	case frame.TypeReceived:
		e.onReceived(f)
	case frame.TypeMaxStreams:
		if f.Arg <= e.peerCredit {
			e.countUseless(now) // credit never goes down: it changes nothing
			return
		}
		e.peerCredit = f.Arg
		e.emit(EvCredit)
	}
}

func (e *Engine) applySettings(p []byte) {
	e.gotSettings = true
	var s frame.Settings
	if err := frame.ParseSettings(p, &s); err != nil {
		e.failFrame(err)
		return
	}
	if v, ok := s.Get(frame.SettingMaxDataPayload); ok {
		e.peerMaxData = int(v)
	}
	if v, ok := s.Get(frame.SettingMaxHeaderBytes); ok {
		e.peerBlock.MaxBytes = int(v)
	}
	if v, ok := s.Get(frame.SettingMaxMessageSize); ok {
		e.peerMaxMsg = int(v)
	}
	v, _ := s.Get(frame.SettingFeatures)
	e.peerFeatures(v)
	if v, ok := s.Get(frame.SettingInitialMaxStreams); ok {
		e.peerCredit = v
		e.emit(EvCredit)
	}
	if v, ok := s.Get(frame.SettingInitialSessionWindow); ok {
		if err := e.sessSend.Adjust(int64(v) - int64(e.peerSessWin)); err != nil {
			e.fail(frame.FlowControlError, err)
			return
		}
		e.peerSessWin = v
	}
	if v, ok := s.Get(frame.SettingInitialStreamWindow); ok {
		// Streams opened before the peer's SETTINGS assumed the default.
		// No DATA was sent before SETTINGS arrived, so a smaller window
		// only leaves a debt.
		for _, st := range e.streams {
			if err := st.tx.Adjust(int64(v) - int64(e.peerStreamWin)); err != nil {
				e.fail(frame.FlowControlError, err)
				return
			}
			e.link(st)
			e.roomCame(st)
		}
		e.peerStreamWin = v
	}
	e.emit(EvCredit) // openers wait for the SETTINGS, whatever they hold
	e.wake()
}

func (e *Engine) onData(f *frame.Frame, now time.Duration) {
	n := len(f.Payload)
	st, state := e.lookup(f.StreamID)
	switch state {
	case stateIdle:
		e.fail(frame.ProtocolError, errors.New("DATA on an idle stream"))
		return
	case stateClosed:
		e.discardSession(n)
		return
	}
	e.lastActivity = now
	if st.local && !st.acked && st.resetErr == nil {
		// DATA before the ACK (a peer handler that wrote before it
		// returned): the peer evidently accepted the stream.
		st.acked, st.ackImplied = true, true
		e.answer(st)
	}
	if st.resetErr != nil && !st.flushing {
		// RST_STREAM sent or received: the stream is closed for the
		// peer's DATA (7.8), which counts against and is credited back to
		// the session window alone (8.4).
		e.discardSession(n)
		return
	}
	if st.finRecv {
		// DATA after the peer's FIN: checked against both windows first
		// (beyond them it breaks the session, 8.3), then a stream error.
		e.discardSession(n)
		if e.err != nil {
			return
		}
		if _, err := st.rx.Discard(n); err != nil {
			e.fail(frame.FlowControlError, err)
			return
		}
		e.resetStream(st, frame.StreamClosed, "DATA after FIN", now, false)
		e.stats.CountError(frame.StreamClosed)
		// Resets the peer provokes count like its own (MadeYouReset).
		if e.youngResets.add(now, maxYoungResets) {
			e.fail(frame.EnhanceYourCalm, errors.New("too many provoked stream errors"))
		}
		return
	}
	st.bytes += int64(n) // read or discarded, it was exchanged (rapid-reset accounting)
	if st.readClosed || st.resetErr != nil {
		// Read side closed (STOP_SENDING sent), or a reset still flushing
		// our bytes (its RST_STREAM not sent yet): both windows, both
		// credited back.
		e.discardSession(n)
		if e.err != nil {
			return
		}
		d, err := st.rx.Discard(n)
		if err != nil {
			e.fail(frame.FlowControlError, err)
			return
		}
		e.queueStreamWU(st, d)
	} else {
		if err := e.sessRecv.Receive(n); err != nil {
			e.fail(frame.FlowControlError, err)
			return
		}
		if err := st.rx.Receive(n); err != nil {
			e.fail(frame.FlowControlError, err)
			return
		}
		// A stream is latency-bound while its payloads are small. A bulk
		// stream sends small ones too (a Write's tail, the end of a
		// batch), but among large ones.
		if n >= interactiveBytes {
			st.rxBulkAt = max(now, 1)
		}
		small := n < interactiveBytes && (st.rxBulkAt == 0 || now-st.rxBulkAt >= shareGap)
		e.shared.Note(st.id, small, now)
		data := f.Payload
		if b := st.rdBuf; len(b) < cap(b) && st.rxq.Len() == 0 {
			// A Read waits with its buffer: copy straight into it.
			k := copy(b[len(b):cap(b)], data)
			st.rdBuf = b[:len(b)+k]
			data = data[k:]
		}
		st.rxq.write(data)
		e.emitStream(st, EvReadable)
	}
	if f.Flags.Has(frame.FlagFIN) {
		st.finRecv = true
		e.emitStream(st, EvReadable)
		e.maybeFinish(st)
	}
}

// discardSession credits n bytes nobody will read back to the session
// window.
func (e *Engine) discardSession(n int) {
	if n == 0 {
		return
	}
	d, err := e.sessRecv.Discard(n)
	if err != nil {
		e.fail(frame.FlowControlError, err)
		return
	}
	e.queueSessionWU(d)
}

func (e *Engine) onHeaders(f *frame.Frame, now time.Duration) {
	e.lastActivity = now
	switch {
	case f.Flags.Has(frame.FlagSYN):
		e.onSyn(f, now)
		return
	case f.Flags.Has(frame.FlagACK):
		st, state := e.lookup(f.StreamID)
		switch state {
		case stateIdle:
			e.fail(frame.ProtocolError, errors.New("ACK on an idle stream"))
			return
		case stateClosed:
			return // a stream we reset before the answer came
		}
		if !st.local || (st.acked && !st.ackImplied) {
			e.fail(frame.ProtocolError, errors.New("unexpected HEADERS ACK"))
			return
		}
		st.ackImplied = false
		if len(f.Payload) > 0 {
			h := make(map[string][]string)
			if err := frame.DecodeHeaderBlock(f.Payload, &e.lim.Block, h); err != nil {
				e.failFrame(err)
				return
			}
			st.hdrs = h
		}
		st.acked = true
		e.answer(st)
	default:
		st := e.liveStream(f, now)
		if st == nil {
			return
		}
		if !f.Flags.Has(frame.FlagFIN) || st.finRecv {
			// Metadata, or anything after the peer's FIN: accepted and
			// ignored, but counted.
			e.countUseless(now)
			return
		}
	}
	// HEADERS with FIN (and maybe ACK): the peer's last frame.
	if st, ok := e.streams[f.StreamID]; ok && f.Flags.Has(frame.FlagFIN) && !st.finRecv {
		st.finRecv = true
		e.emitStream(st, EvReadable)
		e.maybeFinish(st)
	}
}

func (e *Engine) onSyn(f *frame.Frame, now time.Duration) {
	id := f.StreamID
	switch {
	case e.isLocal(id):
		e.fail(frame.ProtocolError, errors.New("SYN with our stream id parity"))
		return
	case id <= e.lastPeerID:
		e.fail(frame.ProtocolError, errors.New("stream id reused or going backwards"))
		return
	case ordinal(id) > e.granted:
		e.fail(frame.StreamLimit, errors.New("stream opened beyond the granted credit"))
		return
	}
	e.lastPeerID = id
	backlog := len(e.acceptQ)
	if e.cfg.Handler {
		backlog = len(e.handlerQ)
	}
	if e.goawaySent || backlog >= e.cfg.AcceptBacklog {
		// Refused: the stream never existed for us. A backlog refusal's
		// slot comes back only as a stream leaves the backlog
		// (repaySlot), so refusals cannot outpace what the application
		// takes; they are not counted against the peer, which cannot
		// know our backlog. After GOAWAY no slot comes back at all.
		e.queueRST(id, frame.RefusedStream, "", true)
		if !e.goawaySent {
			e.owedSlots++
		}
		return
	}
	h := make(map[string][]string)
	if err := frame.DecodeHeaderBlock(f.Payload, &e.lim.Block, h); err != nil {
		e.failFrame(err)
		return
	}
	st := e.newStream(id, false, now)
	st.hdrs = h
	st.finRecv = f.Flags.Has(frame.FlagFIN)
	e.stats.StreamsAccepted.Add(1)
	if e.cfg.Handler {
		e.handlerQ = append(e.handlerQ, st)
		e.emit(EvHandler)
		return
	}
	e.queueAck(st)
	e.acceptQ = append(e.acceptQ, st)
	e.emit(EvAccept)
}

func (e *Engine) onWindowUpdate(f *frame.Frame, now time.Duration) {
	if f.StreamID == 0 {
		if err := e.sessSend.Grant(f.Arg); err != nil {
			e.fail(frame.FlowControlError, err)
			return
		}
		if e.stalled {
			e.stalled = false // the stall clock restarts with any grant
			e.wake()          // the writer looks again (and restarts it if need be)
		}
		if e.lists[0].head != nil || e.lists[1].head != nil {
			e.wake()
		}
		return
	}
	st := e.liveStream(f, now)
	if st == nil {
		return
	}
	if err := st.tx.Grant(f.Arg); err != nil {
		e.fail(frame.FlowControlError, err)
		return
	}
	if st.inList == 0 && st.tx.avail() > 0 && st.txq.Len() > 0 {
		e.link(st)
		e.wake()
	}
	e.roomCame(st)
}

// liveStream returns the live stream a frame names, or nil when the frame
// is done with: one naming a stream never opened fails the session, one
// naming a closed stream counts against the useless-frame budget.
func (e *Engine) liveStream(f *frame.Frame, now time.Duration) *Stream {
	st, state := e.lookup(f.StreamID)
	switch state {
	case stateIdle:
		e.fail(frame.ProtocolError, errors.New(f.Type.String()+" on an idle stream"))
		return nil
	case stateClosed:
		e.countUseless(now)
		return nil
	}
	return st
}

func (e *Engine) onRST(f *frame.Frame, now time.Duration) {
	st := e.liveStream(f, now)
	if st == nil {
		return
	}
	if !st.local && now-st.created < youngStreamAge && st.bytes < youngStreamBytes {
		if e.youngResets.add(now, maxYoungResets) {
			e.fail(frame.EnhanceYourCalm, errors.New("rapid reset"))
			return
		}
	}
	reason := ""
	if len(f.Payload) > 0 {
		reason = string(f.Payload)
	}
	e.stats.ResetsRemote.Add(1)
	e.endStream(st, &StreamError{Code: f.Code(), Remote: true, Reason: reason}, false)
}

func (e *Engine) onStopSending(f *frame.Frame, now time.Duration) {
	st := e.liveStream(f, now)
	if st == nil {
		return
	}
	if st.finSent || st.writeErr != nil || st.resetErr != nil {
		e.countUseless(now)
		return
	}
	// Our send side ends: drop what is queued and send a bare FIN so the
	// peer's receive side ends cleanly; the other direction goes on.
	st.writeErr = &StreamError{Code: f.Code(), Remote: true, Stop: true}
	e.txQueued -= st.txq.Len()
	st.txq.reset()
	st.finQueued = true
	e.unlink(st)
	e.link(st)
	e.emitStream(st, EvWritable)
	e.wake()
}

func (e *Engine) onPing(f *frame.Frame, now time.Duration) {
	if f.Flags.Has(frame.FlagACK) {
		if !e.pingOut || f.Arg != e.pingOpaque {
			e.countUseless(now)
			return
		}
		e.pingOut = false
		e.wake() // the keepalive timer runs again
		if e.pingSentAt < e.rs.resumedAt {
			e.emit(EvPong) // sent before a resume: no RTT sample
			return
		}
		rtt := max(now-e.pingSentAt, time.Microsecond)
		e.lastRTT = rtt
		if e.minRTT == 0 || rtt < e.minRTT {
			e.minRTT = rtt
		}
		if e.srtt == 0 {
			e.srtt = rtt
		} else {
			e.srtt = (7*e.srtt + rtt) / 8
		}
		e.emit(EvPong)
		return
	}
	e.pingTokens = min(float64(pingBurst), e.pingTokens+float64(now-e.pingTokensAt)*pingRate/float64(time.Second))
	e.pingTokensAt = now
	if e.pingTokens < 1 || e.pingAcks >= maxQueuedPingAcks {
		e.fail(frame.EnhanceYourCalm, errors.New("PING flood"))
		return
	}
	e.pingTokens--
	e.pingAcks++
	e.pushUrgent(ctrl{typ: frame.TypePing, flags: frame.FlagACK, arg: f.Arg, peer: true})
}

func (e *Engine) onGoAway(f *frame.Frame, now time.Duration) {
	code := f.Code()
	if code != frame.NoError {
		// Only NO_ERROR drains (9.4). Any other code ends the session at
		// once, whatever the last-stream-id says: its sender processes
		// nothing more and closes. We send nothing more either, no GOAWAY
		// and no reset, and close.
		var err error
		if len(f.Payload) > 0 {
			err = errors.New(string(f.Payload))
		}
		e.stats.CountError(code)
		e.goawayRecv, e.peerGoAway = true, &SessionError{Code: code, Remote: true, Err: err}
		e.emit(EvGoAway)
		e.die(e.peerGoAway, false, false)
		e.urgent.clear()
		e.peerUrg, e.pingAcks = 0, 0
		return
	}
	if e.goawayRecv && f.StreamID >= e.peerLastID {
		// A repeated GOAWAY that lowers nothing changes nothing.
		e.countUseless(now)
		return
	}
	if !e.goawayRecv {
		e.emit(EvGoAway)
		e.peerGoAway = &SessionError{Code: code, Remote: true}
		if len(f.Payload) > 0 {
			e.peerGoAway.Err = errors.New(string(f.Payload))
		}
	}
	// The first GOAWAY, or one that lowers the last-stream-id.
	e.goawayRecv, e.peerLastID = true, f.StreamID
	// A drain: our streams up to the last-stream-id go on; those above it
	// were not processed and end here, as if refused, with no RST_STREAM
	// (the peer refuses their SYNs itself). The last of them may end the
	// drain.
	for id, st := range e.streams {
		if st.local && id > e.peerLastID {
			e.endStream(st, &StreamError{Code: frame.RefusedStream, Remote: true, Reason: "GOAWAY"}, false)
		}
	}
	e.emit(EvCredit) // waiting openers fail with ErrGoAway
	e.maybeDrained()
}

func (e *Engine) countUseless(now time.Duration) {
	if e.useless.add(now, maxUseless) {
		e.fail(frame.EnhanceYourCalm, errors.New("too many useless frames"))
	}
}

// feedFlushing applies only the WINDOW_UPDATEs of a message that arrives
// while a closing session still flushes queued DATA.
func (e *Engine) feedFlushing(msg []byte) {
	var it frame.Iterator
	it.Reset(msg, e.lim)
	for it.Next() {
		f := it.Frame()
		if f.Type != frame.TypeWindowUpdate {
			continue
		}
		if f.StreamID == 0 {
			_ = e.sessSend.Grant(f.Arg)
		} else if st, ok := e.streams[f.StreamID]; ok {
			_ = st.tx.Grant(f.Arg)
			e.link(st)
		}
	}
	e.wake()
}
