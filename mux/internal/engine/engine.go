package engine

import (
	"time"

	"github.com/wsmux/wsmux/flow"
	"github.com/wsmux/wsmux/frame"
)

// Engine is one session's state machine: it consumes whole WebSocket
// messages (Feed), keeps the stream table, the flow-control windows and the
// control queues, and lays out write batches (appendBatch). It has no
// goroutines, no sockets and no clock: every call takes the caller's
// monotonic now. Its outputs besides the batches are events (Events,
// PopStreamEvent).
type Engine struct {
	cfg    Config
	client bool
	stats  *Counters

	events SessionEvents
	dirty  []*Stream // streams with events not yet taken

	// splice, when set, receives the DATA runs appendBatch hands over
	// without copying (Config.Splice); nil: every byte is copied into the
	// batch.
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
	owedSlots   uint32 // slots of streams refused for a full backlog, granted back as streams leave it
	maxStrDirty bool   // a MAX_STREAMS is queued

	// Flow control.
	sessRecv      flow.Receiver
	sessSend      sendCredit
	sessWU        uint32
	sessWUQ       bool
	budget        memBudget
	txQueued      int         // bytes queued by all streams, not yet laid out
	writesWaiting int         // streams whose Write waits for room or credit
	sessWait      streamQueue // writers waiting for session send-buffer room
	lent          [][]byte    // what is left of each Write that lent its bytes (LendWrite), by Stream.lentAt
	lentFree      []int32     // free slots of lent
	largestWin    uint32

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

	// Liveness.
	lastRecv, lastSend, lastActivity time.Duration
	idleTimeout                      time.Duration
	pingOut                          bool
	pingOpaque                       uint32
	pingSentAt                       time.Duration
	lastPingAt                       time.Duration
	srtt, lastRTT                    time.Duration
	minRTT                           time.Duration  // smallest RTT sample (0: none yet)
	shared                           flow.SharedCap // the window cap while streams share the connection
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
	failed                 bool // err is a protocol violation we detected (fail)
	wsClosedByPeer         bool
	wsCloseCode            uint16 // override of the close code (WebSocket-level errors)
	flushing               bool   // closing: queued DATA still goes out after the GOAWAY
	prefaceLen             int    // bytes of the preface at the end of the next batch's dst
	noGoAway               bool   // transport gone: do not try to send GOAWAY

	rs resumeState // resumption (resume.go)
}

// New returns the engine of a new session at time now: client selects the
// role (odd stream ids), stats receives the counters (nil: its own).
func New(cfg Config, client bool, stats *Counters, now time.Duration) *Engine {
	if stats == nil {
		stats = new(Counters)
	}
	e := &Engine{
		cfg:     cfg,
		client:  client,
		stats:   stats,
		streams: make(map[uint32]*Stream),
	}
	if cfg.Splice {
		e.splice = new(splice)
	}
	e.rs.on = cfg.Resume
	e.lim = frame.Limits{MaxDataPayload: cfg.MaxFramePayload, Block: frame.DefaultBlockLimits()}
	e.lim.Block.MaxBytes = cfg.MaxHeaderBytes
	// Until the peer's SETTINGS arrive we assume the protocol defaults.
	e.peerBlock = frame.DefaultBlockLimits()
	e.peerMaxData = frame.DefaultMaxDataPayload
	e.peerMaxMsg = DefaultMaxMessageSize
	e.peerStreamWin = DefaultInitialStreamWindow
	e.peerSessWin = DefaultInitialSessionWindow
	e.peerCredit = DefaultMaxStreams
	e.granted = uint32(cfg.MaxStreams)
	if client {
		e.nextID = 1
	} else {
		e.nextID = 2
	}
	e.budget.limit = int64(cfg.MaxSessionWindow)
	e.sessRecv.Init(flow.ReceiverConfig{Initial: uint32(cfg.InitialSessionWindow), Max: uint32(cfg.MaxSessionWindow)})
	e.sessSend.Init(e.peerSessWin)
	e.largestWin = uint32(cfg.InitialStreamWindow)
	e.shared = flow.SharedCap{Gap: shareGap, Hold: shareHold, Rate: sharedRate, Floor: sharedFloor}
	e.lastRecv, e.lastSend, e.lastActivity = now, now, now
	e.idleTimeout = cfg.IdleTimeout
	e.settingsBy = now + cfg.SettingsTimeout
	e.pingTokens, e.pingTokensAt = pingBurst, now
	e.pingOutTokens, e.pingOutAt = pingOutBurst, now
	e.youngResets.start, e.useless.start = now, now
	return e
}

// appendPreface appends our SETTINGS frame, the first frame we send, and
// queues the first PING (an RTT sample) for the batch that follows.
func (e *Engine) appendPreface(dst []byte, now time.Duration) []byte {
	if e.rs.suspended {
		// Lost before anything went out: the first batch after Resume
		// starts with it.
		e.rs.prefaceOwed = true
		e.sendPing(now)
		return dst
	}
	dst = e.appendSettings(dst)
	e.lastSend = now
	e.sendPing(now)
	return dst
}

func (e *Engine) appendSettings(dst []byte) []byte {
	var s frame.Settings
	_ = s.Set(frame.SettingMaxDataPayload, uint32(e.cfg.MaxFramePayload))
	_ = s.Set(frame.SettingMaxHeaderBytes, uint32(e.cfg.MaxHeaderBytes))
	_ = s.Set(frame.SettingInitialStreamWindow, uint32(e.cfg.InitialStreamWindow))
	_ = s.Set(frame.SettingInitialSessionWindow, uint32(e.cfg.InitialSessionWindow))
	_ = s.Set(frame.SettingInitialMaxStreams, uint32(e.cfg.MaxStreams))
	_ = s.Set(frame.SettingMaxMessageSize, uint32(e.cfg.MaxMessageSize))
	if e.cfg.Resume {
		_ = s.Set(frame.SettingFeatures, frame.FeatureResume)
	}
	if e.cfg.KeepAliveInterval > 0 {
		_ = s.Set(frame.SettingKeepAliveHintMS, uint32(e.cfg.KeepAliveInterval/time.Millisecond))
	}
	e.stats.FramesOut.Add(1)
	out := frame.AppendSettings(dst, &s)
	e.prefaceLen = len(out) - len(dst) // counts against the first batch's limit
	return out
}

// isLocal reports whether id has our parity.
func (e *Engine) isLocal(id uint32) bool { return (id&1 == 1) == e.client }

// ordinal is the 1-based rank of id among the ids of its initiator.
func ordinal(id uint32) uint32 { return (id + 1) / 2 }

type streamState int

const (
	stateIdle   streamState = iota // never opened
	stateLive                      // in the table
	stateClosed                    // opened once, gone now
)

func (e *Engine) lookup(id uint32) (*Stream, streamState) {
	if st, ok := e.streams[id]; ok {
		return st, stateLive
	}
	if e.isLocal(id) {
		if id < e.nextID {
			return nil, stateClosed
		}
		return nil, stateIdle
	}
	if id <= e.lastPeerID {
		return nil, stateClosed
	}
	return nil, stateIdle
}

// newStream creates a stream and puts it in the table.
func (e *Engine) newStream(id uint32, local bool, now time.Duration) *Stream {
	var st *Stream
	if e.cfg.NewStream != nil {
		st = e.cfg.NewStream()
	} else {
		st = new(Stream)
	}
	st.id, st.local, st.created = id, local, now
	st.rx.Init(flow.ReceiverConfig{Initial: uint32(e.cfg.InitialStreamWindow), Max: uint32(e.cfg.MaxStreamWindow), Budget: &e.budget})
	st.tx.Init(e.peerStreamWin)
	e.streams[id] = st
	return st
}

// canOpen reports whether the peer's credit allows one more local stream.
// Until the peer's SETTINGS arrived its credit is unknown (it may be below
// the default), so opens wait for them: they are the peer's first frame.
func (e *Engine) canOpen() bool {
	return e.gotSettings && ordinal(e.nextID) <= e.peerCredit && e.nextID <= frame.MaxStreamID
}
