package mux

import (
	"errors"
	"net/http"
	"time"

	"github.com/wsmux/wsmux/frame"
)

// The receive half of the core: one message in, state changes and queued
// answers out. Every rule that needs session state (stream id order,
// windows, credit, budgets) is enforced here; the codec checked the rest.

// feed consumes one whole WebSocket message from the peer. It returns the
// session error when the message (or an earlier one) ended the session.
func (c *core) feed(msg []byte, now time.Duration) error {
	if c.err != nil {
		if c.flushing {
			c.feedFlushing(msg)
		}
		return c.err
	}
	c.lastRecv = now
	c.stats.messagesIn.Add(1)
	c.stats.bytesIn.Add(uint64(len(msg)))
	var it frame.Iterator
	it.Reset(msg, c.lim)
	frames := 0
	for it.Next() {
		f := it.Frame()
		frames++
		c.handle(&f, now)
		if c.err != nil {
			break
		}
	}
	c.stats.framesIn.Add(uint64(frames))
	if err := it.Err(); err != nil {
		c.failFrame(err)
	}
	if c.err != nil {
		return c.err
	}
	return nil
}

func (c *core) handle(f *frame.Frame, now time.Duration) {
	if !c.gotSettings {
		if f.Type != frame.TypeSettings {
			c.fail(frame.ProtocolError, errors.New("first frame is not SETTINGS"))
			return
		}
		c.applySettings(f.Payload)
		return
	}
	switch f.Type {
	case frame.TypeData:
		c.onData(f, now)
	case frame.TypeHeaders:
		c.onHeaders(f, now)
	case frame.TypeWindowUpdate:
		c.onWindowUpdate(f, now)
	case frame.TypeRSTStream:
		c.onRST(f, now)
	case frame.TypeStopSending:
		c.onStopSending(f, now)
	case frame.TypePing:
		c.onPing(f, now)
	case frame.TypeGoAway:
		c.onGoAway(f)
	case frame.TypeSettings:
		c.fail(frame.ProtocolError, errors.New("second SETTINGS frame"))
	case frame.TypeMaxStreams:
		if f.Arg > c.peerCredit {
			c.peerCredit = f.Arg
			notify(c.creditCh)
		}
	}
}

func (c *core) applySettings(p []byte) {
	c.gotSettings = true
	var s frame.Settings
	if err := frame.ParseSettings(p, &s); err != nil {
		c.failFrame(err)
		return
	}
	if v, ok := s.Get(frame.SettingMaxDataPayload); ok {
		c.peerMaxData = int(v)
	}
	if v, ok := s.Get(frame.SettingMaxHeaderBytes); ok {
		c.peerBlock.MaxBytes = int(v)
	}
	if v, ok := s.Get(frame.SettingMaxMessageSize); ok {
		c.peerMaxMsg = int(v)
	}
	if v, ok := s.Get(frame.SettingInitialMaxStreams); ok {
		c.peerCredit = v
		notify(c.creditCh)
	}
	if v, ok := s.Get(frame.SettingInitialSessionWindow); ok {
		if err := c.sessSend.adjust(int64(v) - int64(c.peerSessWin)); err != nil {
			c.fail(frame.FlowControlError, err)
			return
		}
		c.peerSessWin = v
	}
	if v, ok := s.Get(frame.SettingInitialStreamWindow); ok {
		// Streams opened before the peer's SETTINGS assumed the default.
		// No DATA was sent before SETTINGS arrived, so a smaller window
		// only leaves a debt.
		for _, st := range c.streams {
			if err := st.tx.adjust(int64(v) - int64(c.peerStreamWin)); err != nil {
				c.fail(frame.FlowControlError, err)
				return
			}
			c.link(st)
			st.signalWrite()
		}
		c.peerStreamWin = v
	}
	notify(c.creditCh) // openers wait for the SETTINGS, whatever they hold
	c.wake()
}

func (c *core) onData(f *frame.Frame, now time.Duration) {
	n := len(f.Payload)
	st, state := c.lookup(f.StreamID)
	switch state {
	case stateIdle:
		c.fail(frame.ProtocolError, errors.New("DATA on an idle stream"))
		return
	case stateClosed:
		c.discardSession(n)
		return
	}
	c.lastActivity = now
	if st.local && !st.acked && st.resetErr == nil {
		// DATA before the ACK (a peer handler that wrote before it
		// returned): the peer evidently accepted the stream.
		st.acked, st.ackImplied = true, true
		st.closeAck()
	}
	if st.finRecv {
		// DATA after the peer's FIN: the stream is broken, not the session.
		c.discardSession(n)
		if c.err == nil {
			c.resetStream(st, frame.StreamClosed, "DATA after FIN", now, false)
			c.stats.countError(frame.StreamClosed)
			// Resets the peer provokes count like its own (MadeYouReset).
			if c.youngResets.add(now, maxYoungResets) {
				c.fail(frame.EnhanceYourCalm, errors.New("too many provoked stream errors"))
			}
		}
		return
	}
	if st.readClosed || st.resetErr != nil {
		d, err := st.rx.Discard(n)
		if err != nil {
			c.fail(frame.FlowControlError, err)
			return
		}
		c.discardSession(n)
		c.queueStreamWU(st, d)
	} else {
		if err := c.sessRecv.Receive(n); err != nil {
			c.fail(frame.FlowControlError, err)
			return
		}
		if err := st.rx.Receive(n); err != nil {
			c.fail(frame.FlowControlError, err)
			return
		}
		c.noteData(st.id, now)
		data := f.Payload
		if b := st.rdBuf; len(b) < cap(b) && st.rxq.Len() == 0 {
			// A Read waits with its buffer: copy straight into it.
			k := copy(b[len(b):cap(b)], data)
			st.rdBuf = b[:len(b)+k]
			data = data[k:]
		}
		st.rxq.write(data)
		st.bytes += int64(n)
		st.signalRead()
	}
	if f.Flags.Has(frame.FlagFIN) {
		st.finRecv = true
		st.signalRead()
		c.maybeFinish(st)
	}
}

// discardSession credits n bytes nobody will read back to the session
// window.
func (c *core) discardSession(n int) {
	if n == 0 {
		return
	}
	d, err := c.sessRecv.Discard(n)
	if err != nil {
		c.fail(frame.FlowControlError, err)
		return
	}
	c.queueSessionWU(d)
}

func (c *core) onHeaders(f *frame.Frame, now time.Duration) {
	c.lastActivity = now
	switch {
	case f.Flags.Has(frame.FlagSYN):
		c.onSyn(f, now)
		return
	case f.Flags.Has(frame.FlagACK):
		st, state := c.lookup(f.StreamID)
		switch state {
		case stateIdle:
			c.fail(frame.ProtocolError, errors.New("ACK on an idle stream"))
			return
		case stateClosed:
			return // a stream we reset before the answer came
		}
		if !st.local || (st.acked && !st.ackImplied) {
			c.fail(frame.ProtocolError, errors.New("unexpected HEADERS ACK"))
			return
		}
		st.ackImplied = false
		if len(f.Payload) > 0 {
			h := make(http.Header)
			if err := frame.DecodeHeaderBlock(f.Payload, &c.lim.Block, h); err != nil {
				c.failFrame(err)
				return
			}
			st.hdrs = h
		}
		st.acked = true
		st.closeAck()
	default:
		if c.liveStream(f, now) == nil {
			return
		}
		if !f.Flags.Has(frame.FlagFIN) {
			c.countUseless(now) // metadata: accepted and ignored
			return
		}
	}
	// HEADERS with FIN (and maybe ACK): the peer's last frame.
	if st, ok := c.streams[f.StreamID]; ok && f.Flags.Has(frame.FlagFIN) && !st.finRecv {
		st.finRecv = true
		st.signalRead()
		c.maybeFinish(st)
	}
}

func (c *core) onSyn(f *frame.Frame, now time.Duration) {
	id := f.StreamID
	switch {
	case c.isLocal(id):
		c.fail(frame.ProtocolError, errors.New("SYN with our stream id parity"))
		return
	case id <= c.lastPeerID:
		c.fail(frame.ProtocolError, errors.New("stream id reused or going backwards"))
		return
	case ordinal(id) > c.granted:
		c.fail(frame.StreamLimit, errors.New("stream opened beyond the granted credit"))
		return
	}
	c.lastPeerID = id
	backlog := len(c.acceptQ)
	if c.cfg.Handler != nil {
		backlog = len(c.handlerQ)
	}
	if c.goawaySent || backlog >= c.cfg.AcceptBacklog {
		// Refused: the stream never existed for us; its slot comes back.
		c.queueRST(id, frame.RefusedStream, "", true)
		c.grantSlot()
		if !c.goawaySent && c.youngResets.add(now, maxYoungResets) {
			c.fail(frame.EnhanceYourCalm, errors.New("too many refused or reset streams"))
		}
		return
	}
	h := make(http.Header)
	if err := frame.DecodeHeaderBlock(f.Payload, &c.lim.Block, h); err != nil {
		c.failFrame(err)
		return
	}
	st := c.newStream(id, false, now)
	st.hdrs = h
	st.finRecv = f.Flags.Has(frame.FlagFIN)
	c.stats.streamsAccepted.Add(1)
	if c.cfg.Handler != nil {
		c.handlerQ = append(c.handlerQ, st)
		c.onHandler()
		return
	}
	c.queueAck(st)
	c.acceptQ = append(c.acceptQ, st)
	notify(c.acceptCh)
}

func (c *core) onWindowUpdate(f *frame.Frame, now time.Duration) {
	if f.StreamID == 0 {
		if err := c.sessSend.grant(f.Arg); err != nil {
			c.fail(frame.FlowControlError, err)
			return
		}
		if c.stalled {
			c.stalled = false // the stall clock restarts with any grant
			c.wake()          // the writer looks again (and restarts it if need be)
		}
		if c.lists[0].head != nil || c.lists[1].head != nil {
			c.wake()
		}
		return
	}
	st := c.liveStream(f, now)
	if st == nil {
		return
	}
	if err := st.tx.grant(f.Arg); err != nil {
		c.fail(frame.FlowControlError, err)
		return
	}
	if st.inList == 0 && st.tx.avail() > 0 && st.txq.Len() > 0 {
		c.link(st)
		c.wake()
	}
	st.signalWrite()
}

// liveStream returns the live stream a frame names, or nil when the frame
// is done with: one naming a stream never opened fails the session, one
// naming a closed stream counts against the useless-frame budget.
func (c *core) liveStream(f *frame.Frame, now time.Duration) *Stream {
	st, state := c.lookup(f.StreamID)
	switch state {
	case stateIdle:
		c.fail(frame.ProtocolError, errors.New(f.Type.String()+" on an idle stream"))
		return nil
	case stateClosed:
		c.countUseless(now)
		return nil
	}
	return st
}

func (c *core) onRST(f *frame.Frame, now time.Duration) {
	st := c.liveStream(f, now)
	if st == nil {
		return
	}
	if !st.local && now-st.created < youngStreamAge && st.bytes < youngStreamBytes {
		if c.youngResets.add(now, maxYoungResets) {
			c.fail(frame.EnhanceYourCalm, errors.New("rapid reset"))
			return
		}
	}
	reason := ""
	if len(f.Payload) > 0 {
		reason = string(f.Payload)
	}
	c.stats.resetsRemote.Add(1)
	c.endStream(st, &StreamError{Code: f.Code(), Remote: true, Reason: reason}, false)
}

func (c *core) onStopSending(f *frame.Frame, now time.Duration) {
	st := c.liveStream(f, now)
	if st == nil {
		return
	}
	if st.finSent || st.writeErr != nil || st.resetErr != nil {
		c.countUseless(now)
		return
	}
	// Our send side ends: drop what is queued and send a bare FIN so the
	// peer's receive side ends cleanly; the other direction goes on.
	st.writeErr = &StreamError{Code: f.Code(), Remote: true}
	c.txQueued -= st.txq.Len()
	st.txq.reset()
	st.finQueued = true
	c.unlink(st)
	c.link(st)
	st.signalWrite()
	c.wake()
}

func (c *core) onPing(f *frame.Frame, now time.Duration) {
	if f.Flags.Has(frame.FlagACK) {
		if !c.pingOut || f.Arg != c.pingOpaque {
			c.countUseless(now)
			return
		}
		c.pingOut = false
		c.wake() // the keepalive timer runs again
		rtt := max(now-c.pingSentAt, time.Microsecond)
		c.lastRTT = rtt
		if c.minRTT == 0 || rtt < c.minRTT {
			c.minRTT = rtt
		}
		if c.srtt == 0 {
			c.srtt = rtt
		} else {
			c.srtt = (7*c.srtt + rtt) / 8
		}
		if c.pingDone != nil {
			close(c.pingDone)
			c.pingDone = nil
		}
		return
	}
	c.pingTokens = min(float64(pingBurst), c.pingTokens+float64(now-c.pingTokensAt)*pingRate/float64(time.Second))
	c.pingTokensAt = now
	if c.pingTokens < 1 || c.pingAcks >= maxQueuedPingAcks {
		c.fail(frame.EnhanceYourCalm, errors.New("PING flood"))
		return
	}
	c.pingTokens--
	c.pingAcks++
	c.pushUrgent(ctrl{typ: frame.TypePing, flags: frame.FlagACK, arg: f.Arg, peer: true})
}

func (c *core) onGoAway(f *frame.Frame) {
	last := f.StreamID
	if c.goawayRecv && last > c.peerLastID {
		last = c.peerLastID // a later GOAWAY may only lower last
	}
	c.goawayRecv, c.peerLastID = true, last
	code := f.Code()
	// Every GOAWAY starts a drain: streams up to last go on. A peer that
	// failed follows its GOAWAY with the WebSocket close at once, and the
	// session then ends with the GOAWAY's code. (Set before the streams
	// beyond last end below: the last of them ends the drain, and the
	// session with this error.)
	if c.peerGoAway == nil || code != frame.NoError {
		var err error
		if len(f.Payload) > 0 {
			err = errors.New(string(f.Payload))
		}
		if code != frame.NoError {
			c.stats.countError(code)
		}
		c.peerGoAway = &SessionError{Code: code, Remote: true, Err: err}
	}
	for id, st := range c.streams {
		if st.local && id > last {
			c.endStream(st, &StreamError{Code: frame.RefusedStream, Remote: true, Reason: "GOAWAY"}, false)
		}
	}
	notify(c.creditCh) // waiting openers fail with ErrGoAway
	c.maybeDrained()
}

func (c *core) countUseless(now time.Duration) {
	if c.useless.add(now, maxUseless) {
		c.fail(frame.EnhanceYourCalm, errors.New("too many useless frames"))
	}
}

// feedFlushing applies only the WINDOW_UPDATEs of a message that arrives
// while a closing session still flushes queued DATA.
func (c *core) feedFlushing(msg []byte) {
	var it frame.Iterator
	it.Reset(msg, c.lim)
	for it.Next() {
		f := it.Frame()
		if f.Type != frame.TypeWindowUpdate {
			continue
		}
		if f.StreamID == 0 {
			_ = c.sessSend.grant(f.Arg)
		} else if st, ok := c.streams[f.StreamID]; ok {
			_ = st.tx.grant(f.Arg)
			c.link(st)
		}
	}
	c.wake()
}
