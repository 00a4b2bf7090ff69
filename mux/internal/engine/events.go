package engine

// SessionEvents are what happened to the session since the driver last
// asked (Events): a set of bits.
type SessionEvents uint8

// Session events.
const (
	// EvSend: there is something to lay out and write (NextBatch), or
	// the timers changed (NextTimer).
	EvSend SessionEvents = 1 << iota
	// EvAccept: a peer stream waits in the accept queue (Accept).
	EvAccept
	// EvHandler: a peer stream waits for a handler (TakeHandler).
	EvHandler
	// EvCredit: openers may look again (stream credit, SETTINGS, GOAWAY).
	EvCredit
	// EvPong: our PING was answered (LastRTT).
	EvPong
	// EvClosed: the session ended (Err).
	EvClosed
	// EvGoAway: the peer sent GOAWAY (the first one emits it).
	EvGoAway
)

// StreamEvents are what happened to one stream: a set of bits.
type StreamEvents uint8

// Stream events.
const (
	// EvReadable: data, EOF or an error is there for Read, or a waiting
	// Read's buffer took data (Lent).
	EvReadable StreamEvents = 1 << iota
	// EvWritable: credit or buffer room came, or Write now fails.
	EvWritable
	// EvAnswered: the stream's open was answered (ACK, refusal, the
	// session's end) or, for a peer stream, its ACK was written.
	EvAnswered
)

// emit records session events.
func (e *Engine) emit(ev SessionEvents) { e.events |= ev }

// emitStream records events of st.
func (e *Engine) emitStream(st *Stream, ev StreamEvents) {
	if st.ev == 0 {
		e.dirty = append(e.dirty, st)
	}
	st.ev |= ev
}

// wake tells the driver there is something to write.
func (e *Engine) wake() { e.events |= EvSend }

// Events returns the session events since the last call and clears them.
func (e *Engine) Events() SessionEvents {
	ev := e.events
	e.events = 0
	return ev
}

// PopStreamEvent returns a stream with events and its events, cleared, or
// nil when there are none.
func (e *Engine) PopStreamEvent() (*Stream, StreamEvents) {
	n := len(e.dirty)
	if n == 0 {
		return nil, 0
	}
	st := e.dirty[n-1]
	e.dirty[n-1] = nil
	e.dirty = e.dirty[:n-1]
	ev := st.ev
	st.ev = 0
	return st, ev
}

// HasEvents reports whether events wait.
func (e *Engine) HasEvents() bool { return e.events != 0 || len(e.dirty) > 0 }
