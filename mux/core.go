package mux

import (
	"errors"
	"time"

	"github.com/wsmux/wsmux/flow"
	"github.com/wsmux/wsmux/frame"
)

// core is the session state machine: it consumes whole WebSocket messages
// (feed), keeps the stream table, the flow-control windows and the control
// queues, and lays out write batches (appendBatch). It has no goroutines,
// no sockets and no clock: every method takes the caller's monotonic now.
// It is guarded by Session.mu; its only outputs besides the returned batches
// are non-blocking notifications (chan struct{} of capacity 1, or closed
// channels) and the wake/onHandler hooks, which must not block either.
type core struct {
	cfg    *Config
	client bool
	stats  *statsCounters
	sess   *Session // back-pointer given to new streams; never used here

	wake      func() // there is something for the writer
	onHandler func() // a stream was queued for the Handler
	// splice, when set, receives the DATA runs appendBatch hands over
	// without copying (the session's, over a socket that writes vectors);
	// nil: every byte is copied into the batch.
	splice *splice

	// Settings.
	lim           frame.Limits      // what we accept
	peerBlock     frame.BlockLimits // what the peer accepts
	peerMaxData   int
	peerMaxMsg    int
	peerStreamWin uint32
	peerSessWin   uint32
	gotSettings   bool
	settingsBy    time.Duration

	// Streams.
	streams     map[uint32]*Stream
	nextID      uint32 // next local stream id
	peerCredit  uint32 // cumulative credit of local streams granted by the peer
	lastPeerID  uint32 // highest peer-opened id seen
	granted     uint32 // cumulative credit of peer streams we granted
	maxStrDirty bool   // a MAX_STREAMS is queued

	// Flow control.
	sessRecv   flow.Receiver
	sessSend   sendCredit
	sessWU     uint32
	sessWUQ    bool
	budget     memBudget
	txQueued   int         // bytes queued by all streams, not yet laid out
	sessWait   streamQueue // writers waiting for session send-buffer room
	largestWin uint32

	// Control queues.
	urgent    ctrlQueue
	credit    ctrlQueue
	peerUrg   int // urgent entries induced by the peer, queued
	pingAcks  int // PING ACKs queued
	ackedList []*Stream

	// Data scheduler.
	lists [2]streamList // 0: interactive, 1: bulk
	iaRun int

	// Accept and handlers.
	acceptQ  []*Stream
	handlerQ []*Stream
	acceptCh chan struct{}
	creditCh chan struct{}

	// Liveness.
	lastRecv, lastSend, lastActivity time.Duration
	idleTimeout                      time.Duration
	pingOut                          bool
	pingOpaque                       uint32
	pingSentAt                       time.Duration
	pingDone                         chan struct{}
	lastPingAt                       time.Duration
	srtt, lastRTT                    time.Duration
	minRTT                           time.Duration // smallest RTT sample (0: none yet)
	lastDataID                       uint32        // the stream the last DATA was for...
	lastDataAt                       time.Duration // ...and when
	sharedUntil                      time.Duration // streams share the connection until then (window cap)
	pingTokens                       float64
	pingTokensAt                     time.Duration
	youngResets, useless             rateCounter
	partial                          bool          // a message is partly received (driver's account)
	partialSince                     time.Duration // when its first byte came
	stalled                          bool          // data queued, peer's session window at zero
	stallSince                       time.Duration // since when

	// Our own PINGs, whatever asks for them (Ping, keepalive, RTT
	// probes), stay under the rate a wsmux peer accepts: a bucket of
	// pingOutBurst at pingRate. A PING asked for without a token goes
	// out when one comes (pingWanted; the writer's timer).
	pingOutTokens float64
	pingOutAt     time.Duration
	pingWanted    bool

	// Shutdown.
	goawaySent, goawayRecv bool
	goawayCode             frame.ErrorCode // the code of the GOAWAY we sent
	peerGoAway             *SessionError   // what the peer's GOAWAY said
	peerLastID             uint32
	drainBy                time.Duration // GOAWAY drain deadline (0: none)
	closeBy                time.Duration // hard deadline once dead
	err                    *SessionError
	deadCh                 chan struct{}
	wsClosedByPeer         bool
	wsCloseCode            uint16 // override of the close code (WebSocket-level errors)
	flushing               bool   // closing: queued DATA still goes out after the GOAWAY
	prefaceLen             int    // bytes of the preface at the end of the next batch's dst
	noGoAway               bool   // transport gone: do not try to send GOAWAY
}

// ctrl is one queued control frame.
type ctrl struct {
	typ   frame.Type
	flags frame.Flags
	id    uint32
	arg   uint32
	st    *Stream
	text  string
	block []byte // HEADERS SYN: our header block (kept here, not on the stream)
	peer  bool   // induced by the peer: counts against maxUrgent
}

// ctrlQueue is a FIFO that reuses its backing array.
type ctrlQueue struct {
	q    []ctrl
	head int
}

func (q *ctrlQueue) push(e ctrl)  { q.q = append(q.q, e) }
func (q *ctrlQueue) empty() bool  { return q.head == len(q.q) }
func (q *ctrlQueue) front() *ctrl { return &q.q[q.head] }
func (q *ctrlQueue) pop() {
	q.q[q.head] = ctrl{}
	q.head++
	if q.head == len(q.q) {
		q.q, q.head = q.q[:0], 0
		if cap(q.q) > maxKeptCtrl {
			q.q = nil // a burst (thousands of opens) is over: do not keep its array
		}
	}
}

// maxKeptCtrl is the capacity a drained ctrlQueue keeps.
const maxKeptCtrl = 4096

func (q *ctrlQueue) clear() {
	clear(q.q)
	q.q, q.head = q.q[:0], 0
}

// keepAcks drops every entry but HEADERS ACKs, in place and in order.
func (q *ctrlQueue) keepAcks() {
	n := 0
	for _, e := range q.q[q.head:] {
		if e.typ == frame.TypeHeaders && e.flags == frame.FlagACK {
			q.q[n] = e
			n++
		}
	}
	clear(q.q[n:])
	q.q, q.head = q.q[:n], 0
}

// streamQueue is a FIFO of streams that reuses its backing array.
type streamQueue struct {
	q    []*Stream
	head int
}

func (q *streamQueue) push(st *Stream) { q.q = append(q.q, st) }
func (q *streamQueue) empty() bool     { return q.head == len(q.q) }
func (q *streamQueue) pop() *Stream {
	st := q.q[q.head]
	q.q[q.head] = nil
	q.head++
	if q.head == len(q.q) {
		q.q, q.head = q.q[:0], 0
	}
	return st
}

// rateCounter counts events in fixed windows of budgetWindow.
type rateCounter struct {
	start time.Duration
	n     int
}

// add counts one event at now and reports whether more than limit happened
// in the current window.
func (r *rateCounter) add(now time.Duration, limit int) bool {
	if now-r.start >= budgetWindow {
		r.start, r.n = now, 0
	}
	r.n++
	return r.n > limit
}

// memBudget is the per-session flow.Budget approving window growth.
type memBudget struct {
	used, limit int64
}

func (b *memBudget) Reserve(n int64) bool {
	if b.used+n > b.limit {
		return false
	}
	b.used += n
	return true
}

func (b *memBudget) Release(n int64) { b.used -= n }

func newCore(cfg *Config, client bool, stats *statsCounters, now time.Duration) *core {
	c := &core{
		cfg:      cfg,
		client:   client,
		stats:    stats,
		streams:  make(map[uint32]*Stream),
		acceptCh: make(chan struct{}, 1),
		creditCh: make(chan struct{}, 1),
		deadCh:   make(chan struct{}),
		wake:     func() {},
	}
	c.onHandler = func() {}
	c.lim = frame.Limits{MaxDataPayload: cfg.MaxFramePayload, Block: frame.DefaultBlockLimits()}
	c.lim.Block.MaxBytes = cfg.MaxHeaderBytes
	// Until the peer's SETTINGS arrive we assume the protocol defaults.
	c.peerBlock = frame.DefaultBlockLimits()
	c.peerMaxData = frame.DefaultMaxDataPayload
	c.peerMaxMsg = DefaultMaxMessageSize
	c.peerStreamWin = DefaultInitialStreamWindow
	c.peerSessWin = DefaultInitialSessionWindow
	c.peerCredit = DefaultMaxStreams
	c.granted = uint32(cfg.MaxStreams)
	if client {
		c.nextID = 1
	} else {
		c.nextID = 2
	}
	c.budget.limit = int64(cfg.MaxSessionWindow)
	c.sessRecv.Init(flow.ReceiverConfig{Initial: uint32(cfg.InitialSessionWindow), Max: uint32(cfg.MaxSessionWindow)})
	c.sessSend.Init(c.peerSessWin)
	c.largestWin = uint32(cfg.InitialStreamWindow)
	c.lastRecv, c.lastSend, c.lastActivity = now, now, now
	c.idleTimeout = cfg.IdleTimeout
	c.settingsBy = now + cfg.SettingsTimeout
	c.pingTokens, c.pingTokensAt = pingBurst, now
	c.pingOutTokens, c.pingOutAt = pingOutBurst, now
	c.youngResets.start, c.useless.start = now, now
	return c
}

// appendPreface appends our SETTINGS frame; it is the first frame we send.
func (c *core) appendPreface(dst []byte) []byte {
	var s frame.Settings
	_ = s.Set(frame.SettingMaxDataPayload, uint32(c.cfg.MaxFramePayload))
	_ = s.Set(frame.SettingMaxHeaderBytes, uint32(c.cfg.MaxHeaderBytes))
	_ = s.Set(frame.SettingInitialStreamWindow, uint32(c.cfg.InitialStreamWindow))
	_ = s.Set(frame.SettingInitialSessionWindow, uint32(c.cfg.InitialSessionWindow))
	_ = s.Set(frame.SettingInitialMaxStreams, uint32(c.cfg.MaxStreams))
	_ = s.Set(frame.SettingMaxMessageSize, uint32(c.cfg.MaxMessageSize))
	if c.cfg.KeepAliveInterval > 0 {
		_ = s.Set(frame.SettingKeepAliveHintMS, uint32(c.cfg.KeepAliveInterval/time.Millisecond))
	}
	c.stats.framesOut.Add(1)
	out := frame.AppendSettings(dst, &s)
	c.prefaceLen = len(out) - len(dst) // counts against the first batch's limit
	return out
}

// isLocal reports whether id has our parity.
func (c *core) isLocal(id uint32) bool { return (id&1 == 1) == c.client }

// ordinal is the 1-based rank of id among the ids of its initiator.
func ordinal(id uint32) uint32 { return (id + 1) / 2 }

type streamState int

const (
	stateIdle   streamState = iota // never opened
	stateLive                      // in the table
	stateClosed                    // opened once, gone now
)

func (c *core) lookup(id uint32) (*Stream, streamState) {
	if st, ok := c.streams[id]; ok {
		return st, stateLive
	}
	if c.isLocal(id) {
		if id < c.nextID {
			return nil, stateClosed
		}
		return nil, stateIdle
	}
	if id <= c.lastPeerID {
		return nil, stateClosed
	}
	return nil, stateIdle
}

// fail ends the session with a local error: GOAWAY(code) goes out first,
// then the WebSocket close.
func (c *core) fail(code frame.ErrorCode, err error) {
	if c.err != nil {
		return
	}
	c.stats.countError(code)
	if l := c.cfg.Logger; l != nil {
		l.Warn("wsmux: session error", "code", code.String(), "err", err)
	}
	c.die(&SessionError{Code: code, Err: err}, true, false)
}

// failFrame ends the session with the code a codec or flow error carries.
func (c *core) failFrame(err error) {
	var fe *frame.Error
	code := frame.ProtocolError
	if errors.As(err, &fe) {
		code = fe.Code
	}
	c.fail(code, err)
}

// die records the session's end, wakes everybody and, if goaway, queues
// the GOAWAY that is the last frame we send.
func (c *core) die(e *SessionError, goaway, flush bool) {
	if c.err != nil {
		return
	}
	c.err = e
	if flush {
		// A stream the application accepted keeps its ACK: the peer's
		// Open (Kubernetes' CreateStream) must not fail for a stream whose
		// data and FIN we are still flushing.
		c.credit.keepAcks()
	} else {
		c.credit.clear()
	}
	if !flush {
		// A failing session sends nothing but its GOAWAY. A closing one
		// keeps its queued SYNs and resets: the DATA it still flushes
		// must not reach the peer before them.
		c.urgent.clear()
		c.peerUrg, c.pingAcks = 0, 0
	}
	if goaway && !c.noGoAway {
		text := ""
		if e.Err != nil && !e.Remote {
			text = truncText(e.Err.Error(), frame.MaxDebugLen)
		}
		c.urgent.push(ctrl{typ: frame.TypeGoAway, id: c.lastPeerID, arg: uint32(e.Code), text: text})
		c.goawaySent = true
	}
	c.flushing = flush
	for _, st := range c.streams {
		if !flush || st.flushing {
			c.unlink(st)
			c.txQueued -= st.txq.Len()
			st.txq.reset()
			st.flushing = false
		}
		st.wakeAll()
		st.closeAck() // Open and Accepted waiters
	}
	if !flush {
		c.txQueued = 0
	}
	for _, st := range c.acceptQ {
		st.wakeAll()
	}
	if c.pingDone != nil {
		close(c.pingDone)
		c.pingDone = nil
	}
	close(c.deadCh)
	c.wake()
}

func truncText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 && s[len(s)-1]&0xC0 == 0x80 { // do not cut a UTF-8 sequence
		s = s[:len(s)-1]
	}
	if len(s) > 0 && s[len(s)-1] >= 0xC0 {
		s = s[:len(s)-1]
	}
	return s
}

// pushUrgent queues an urgent frame; peer-induced ones are bounded.
func (c *core) pushUrgent(e ctrl) {
	if e.peer {
		if c.peerUrg >= maxUrgent {
			c.fail(frame.EnhanceYourCalm, errors.New("urgent queue overflow: the peer does not read"))
			return
		}
		c.peerUrg++
	}
	c.urgent.push(e)
	c.wake()
}

func (c *core) queueRST(id uint32, code frame.ErrorCode, reason string, peer bool) {
	c.pushUrgent(ctrl{typ: frame.TypeRSTStream, id: id, arg: uint32(code), text: truncText(reason, frame.MaxReasonLen), peer: peer})
}

func (c *core) queueAck(st *Stream) {
	c.credit.push(ctrl{typ: frame.TypeHeaders, flags: frame.FlagACK, id: st.id, st: st})
	c.wake()
}

func (c *core) queueStreamWU(st *Stream, d uint32) {
	if d == 0 {
		return
	}
	st.wuPending += d
	if !st.wuQueued {
		st.wuQueued = true
		c.credit.push(ctrl{typ: frame.TypeWindowUpdate, id: st.id, st: st})
		c.wake()
	}
}

func (c *core) queueSessionWU(d uint32) {
	if d == 0 {
		return
	}
	c.sessWU += d
	if !c.sessWUQ {
		c.sessWUQ = true
		c.credit.push(ctrl{typ: frame.TypeWindowUpdate})
		c.wake()
	}
}

// grantSlot gives the peer one more stream.
func (c *core) grantSlot() {
	if c.goawaySent || c.err != nil || c.granted >= frame.MaxCredit {
		return
	}
	c.granted++
	if !c.maxStrDirty {
		c.maxStrDirty = true
		c.credit.push(ctrl{typ: frame.TypeMaxStreams})
		c.wake()
	}
}

// consumed returns the credit of n bytes the application read from st.
func (c *core) consumed(st *Stream, n int, now time.Duration) {
	if c.err != nil {
		return
	}
	if !st.removed && !st.finRecv && st.resetErr == nil {
		before := st.rx.Window()
		// Auto-tune only on reads that drained the buffer. While the
		// application is what holds data back, reading a full buffer at
		// memory speed says nothing about the path, and a larger window
		// would only lengthen the queue in the socket buffers ahead of the
		// session's other streams (head-of-line latency).
		rtt := c.srtt
		if st.rxq.Len() > 0 {
			rtt = 0
		}
		st.rx.SetLimit(c.sharedCap(now))
		c.queueStreamWU(st, st.rx.Consume(n, now, rtt))
		if w := st.rx.Window(); w > before && w > c.largestWin {
			c.largestWin = w
			c.queueSessionWU(c.sessRecv.EnsureWindow(2 * w))
		}
	}
	c.queueSessionWU(c.sessRecv.Consume(n, now, c.srtt))
}

// sharedCap is the receive window limit of every stream while streams
// share the connection: one bandwidth-delay product of a sharedRate path at
// the minimum RTT, at least sharedFloor; 0 (no limit) otherwise.
func (c *core) sharedCap(now time.Duration) uint32 {
	if now >= c.sharedUntil || c.minRTT <= 0 {
		return 0
	}
	return uint32(min(max(sharedRate*c.minRTT.Seconds(), sharedFloor), flow.MaxWindow))
}

// noteData records DATA for stream id at now and notices when streams
// share the connection.
func (c *core) noteData(id uint32, now time.Duration) {
	if c.lastDataID != id && c.lastDataID != 0 && now-c.lastDataAt < shareGap {
		c.sharedUntil = now + shareHold
	}
	c.lastDataID, c.lastDataAt = id, now
}

// newStream creates a stream and puts it in the table.
func (c *core) newStream(id uint32, local bool, now time.Duration) *Stream {
	st := &Stream{
		sess:    c.sess,
		id:      id,
		local:   local,
		created: now,
	}
	st.rx.Init(flow.ReceiverConfig{Initial: uint32(c.cfg.InitialStreamWindow), Max: uint32(c.cfg.MaxStreamWindow), Budget: &c.budget})
	st.tx.Init(c.peerStreamWin)
	c.streams[id] = st
	return st
}

// canOpen reports whether the peer's credit allows one more local stream.
// Until the peer's SETTINGS arrived its credit is unknown (it may be below
// the default), so opens wait for them: they are the peer's first frame.
func (c *core) canOpen() bool {
	return c.gotSettings && ordinal(c.nextID) <= c.peerCredit && c.nextID <= frame.MaxStreamID
}

// openLocal opens the next local stream with an encoded header block.
func (c *core) openLocal(block []byte, now time.Duration) *Stream {
	st := c.newStream(c.nextID, true, now)
	c.nextID += 2
	c.lastActivity = now
	c.stats.streamsOpened.Add(1)
	c.urgent.push(ctrl{typ: frame.TypeHeaders, flags: frame.FlagSYN, id: st.id, st: st, block: block})
	c.wake()
	return st
}

// resetStream resets st locally with code: both directions end, unread
// bytes are dropped and credited back, and RST_STREAM goes out. With flush,
// bytes Write already queued are sent first (as far as credit allows), so
// the peer reads them before the reset.
func (c *core) resetStream(st *Stream, code frame.ErrorCode, reason string, now time.Duration, flush bool) {
	if st.resetErr != nil || c.err != nil {
		return
	}
	c.stats.resetsLocal.Add(1)
	if n := st.rxq.Len() + st.dropDirect(); n > 0 {
		st.rxq.reset()
		c.queueSessionWU(c.sessRecv.Consume(n, now, 0))
	}
	if flush && st.txq.Len() > 0 && !st.finSent {
		st.flushing = true
		st.resetErr = &StreamError{Code: code, Reason: reason}
		if st.local && !st.acked {
			st.closeAck()
		}
		st.wakeAll()
		c.link(st)
		if st.inList == 0 {
			c.finishFlush(st)
		}
		c.wake()
		return
	}
	c.queueRST(st.id, code, reason, false)
	c.endStream(st, &StreamError{Code: code, Reason: reason}, true)
}

// finishFlush sends the RST_STREAM of a flushed reset and ends the stream.
func (c *core) finishFlush(st *Stream) {
	if !st.flushing {
		return
	}
	st.flushing = false
	c.txQueued -= st.txq.Len()
	st.txq.reset()
	c.unlink(st)
	c.queueRST(st.id, st.resetErr.Code, st.resetErr.Reason, false) // set by resetStream
	c.maybeFinish(st)
}

// endStream ends both directions of st with err (a reset either way).
// Buffered received bytes stay readable.
func (c *core) endStream(st *Stream, err *StreamError, local bool) {
	if st.resetErr != nil && !st.flushing {
		return
	}
	if st.resetErr == nil {
		st.resetErr = err
	}
	st.flushing = false
	c.txQueued -= st.txq.Len()
	st.txq.reset()
	c.unlink(st)
	if st.local && !st.acked {
		st.closeAck()
	}
	st.wakeAll()
	c.maybeFinish(st)
}

// maybeFinish removes st once both directions ended and, for a peer stream,
// it was accepted or handled; a peer stream's slot then comes back.
func (c *core) maybeFinish(st *Stream) {
	if st.removed || st.flushing {
		return
	}
	ended := st.resetErr != nil || (st.finRecv && st.finSent)
	if !ended || (!st.local && !st.handled) {
		return
	}
	st.removed = true
	delete(c.streams, st.id)
	c.unlink(st)
	st.rx.Release()
	if !st.local {
		c.grantSlot()
	}
	c.maybeDrained()
}

// maybeDrained ends a GOAWAY drain once no stream is left.
func (c *core) maybeDrained() {
	if c.err != nil || len(c.streams) > 0 || !(c.goawaySent || c.goawayRecv) {
		return
	}
	if c.goawaySent {
		c.die(&SessionError{Code: c.goawayCode}, false, false)
	} else {
		c.die(c.peerGoAway, false, false)
	}
}

// goAway starts a graceful shutdown: GOAWAY(code) naming the last peer
// stream, no new streams either way, the session ends when the last stream
// does or at the drain deadline.
func (c *core) goAway(code frame.ErrorCode, now time.Duration) {
	if c.err != nil || c.goawaySent {
		return
	}
	c.goawaySent, c.goawayCode = true, code
	c.urgent.push(ctrl{typ: frame.TypeGoAway, id: c.lastPeerID, arg: uint32(code)})
	c.drainBy = now + c.cfg.CloseTimeout
	c.wake()
	c.maybeDrained()
}

// shutdown is Session.Close: every stream is reset locally (buffered
// received bytes stay readable), GOAWAY(NO_ERROR), then the close.
func (c *core) shutdown(now time.Duration) {
	if c.err != nil {
		return
	}
	c.closeBy = now + c.cfg.CloseTimeout
	c.die(&SessionError{Code: frame.NoError, Err: ErrSessionClosed}, true, true)
}

// sendPing queues our PING; only one is outstanding at a time.
func (c *core) sendPing(now time.Duration) {
	if c.pingOut || c.err != nil {
		return
	}
	c.pingOutTokens = min(float64(pingOutBurst), c.pingOutTokens+float64(now-c.pingOutAt)*pingRate/float64(time.Second))
	c.pingOutAt = now
	if c.pingOutTokens < 1 {
		if !c.pingWanted {
			c.pingWanted = true // nextTimer: when the next token comes
			c.wake()
		}
		return
	}
	c.pingOutTokens--
	c.pingWanted = false
	c.pingOut = true
	c.pingOpaque++
	c.pingSentAt = now
	c.lastPingAt = now
	c.urgent.push(ctrl{typ: frame.TypePing, arg: c.pingOpaque})
	c.wake()
}

// tick runs the timers at now.
func (c *core) tick(now time.Duration) {
	if c.err != nil {
		if c.flushing && c.closeBy > 0 && now >= c.closeBy {
			c.flushing = false // the peer did not take the rest in time
		}
		return
	}
	cfg := c.cfg
	if !c.gotSettings && now >= c.settingsBy {
		c.fail(frame.SettingsTimeout, errors.New("no SETTINGS from the peer"))
		return
	}
	if cfg.KeepAliveInterval > 0 {
		if cfg.KeepAliveTimeout > 0 && now-c.lastRecv >= cfg.KeepAliveTimeout {
			c.fail(frame.KeepaliveTimeout, errors.New("nothing received for the keepalive timeout"))
			return
		}
		if now-c.lastSend >= cfg.KeepAliveInterval {
			c.sendPing(now)
		}
	}
	if c.idleTimeout > 0 && now-c.lastActivity >= c.idleTimeout {
		c.fail(frame.IdleTimeout, errors.New("idle timeout"))
		return
	}
	if cfg.ReadTimeout > 0 && c.partial && now-c.partialSince >= cfg.ReadTimeout {
		c.fail(frame.KeepaliveTimeout, errors.New("a partly received message stalled for the read timeout"))
		return
	}
	if cfg.StallTimeout > 0 && c.stalled && now-c.stallSince >= cfg.StallTimeout {
		c.fail(frame.StallTimeout, errors.New("the peer kept the session window at zero with data queued"))
		return
	}
	if c.drainBy > 0 && now >= c.drainBy {
		c.die(&SessionError{Code: frame.NoError, Err: errors.New("GOAWAY drain timed out")}, false, false)
		return
	}
	if c.gotSettings && now-c.lastPingAt >= rttPingInterval && now-c.lastActivity < rttPingInterval {
		c.sendPing(now) // RTT sample for window auto-tuning while data flows
	}
	if c.gotSettings && now < c.sharedUntil && now-c.lastPingAt >= shareProbe {
		c.sendPing(now) // minimum-RTT sample for the shared-connection cap
	}
	if c.pingWanted {
		c.sendPing(now) // one asked for while the bucket was empty
	}
}

// pingReadyAt returns the earliest time at or after now at which the
// outbound PING bucket holds a token.
func (c *core) pingReadyAt(now time.Duration) time.Duration {
	tokens := c.pingOutTokens + float64(now-c.pingOutAt)*pingRate/float64(time.Second)
	if tokens >= 1 {
		return now
	}
	return now + time.Duration((1-tokens)*float64(time.Second)/pingRate) + 1
}

// nextTimer returns when tick must run next (relative to now), or -1.
func (c *core) nextTimer(now time.Duration) time.Duration {
	if c.err != nil {
		if c.flushing && c.closeBy > 0 {
			return max(c.closeBy-now, 0)
		}
		return -1
	}
	next := time.Duration(-1)
	at := func(t time.Duration) {
		if next < 0 || t < next {
			next = t
		}
	}
	if !c.gotSettings {
		at(c.settingsBy)
	}
	if c.cfg.KeepAliveInterval > 0 {
		if c.cfg.KeepAliveTimeout > 0 {
			at(c.lastRecv + c.cfg.KeepAliveTimeout)
		}
		if !c.pingOut {
			at(max(c.lastSend+c.cfg.KeepAliveInterval, c.pingReadyAt(now)))
		}
	}
	if c.pingWanted && !c.pingOut {
		at(c.pingReadyAt(now))
	}
	if c.idleTimeout > 0 {
		at(c.lastActivity + c.idleTimeout)
	}
	if c.drainBy > 0 {
		at(c.drainBy)
	}
	if rt := c.cfg.ReadTimeout; rt > 0 {
		if c.partial {
			at(c.partialSince + rt)
		} else {
			at(now + rt) // a message that starts meanwhile is checked then
		}
	}
	if c.cfg.StallTimeout > 0 && c.stalled {
		at(c.stallSince + c.cfg.StallTimeout)
	}
	if next < 0 {
		return -1
	}
	return max(next-now, 0)
}

// setPartial records the driver's account of the message being received:
// partly received since since (ok), or none in progress. The read timeout
// runs on it.
func (c *core) setPartial(since time.Duration, ok bool) {
	c.partial, c.partialSince = ok, since
}

// checkStall notes whether data is held back by a zero session window
// alone, and since when (the stall timeout runs on it).
func (c *core) checkStall(now time.Duration) {
	blocked := c.err == nil && c.gotSettings && c.txQueued > 0 && c.sessSend.avail() <= 0
	switch {
	case blocked && !c.stalled:
		c.stalled, c.stallSince = true, now
	case !blocked:
		c.stalled = false
	}
}

// notify does a non-blocking send on a capacity-1 channel.
func notify(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
