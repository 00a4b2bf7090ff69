package engine

import "time"

// Config is what the engine needs of a session's configuration; package
// mux fills it from its Config after defaults and validation. Durations of
// zero or less turn their timer off.
type Config struct {
	MaxFramePayload      int // largest DATA payload we accept
	MaxHeaderBytes       int // largest header block we accept
	InitialStreamWindow  int
	MaxStreamWindow      int
	InitialSessionWindow int
	MaxSessionWindow     int
	MaxStreams           int // peer-opened streams open at once
	AcceptBacklog        int // peer streams waiting for Accept (or a handler)
	MaxMessageSize       int // largest message we accept
	KeepAliveInterval    time.Duration
	KeepAliveTimeout     time.Duration
	IdleTimeout          time.Duration
	CloseTimeout         time.Duration // Close and GOAWAY drains
	SettingsTimeout      time.Duration
	ReadTimeout          time.Duration // one message, first byte to last
	StallTimeout         time.Duration
	StreamSendBuffer     int
	SessionSendBuffer    int
	MaxBatch             int  // largest batch payload we lay out
	Handler              bool // peer streams go to handlers, not Accept
	// Splice: a batch may take whole send chunks (Batch.Segs) instead
	// of copying them into its frames; the driver writes them with the
	// batch, and BatchWritten gives them back.
	Splice bool
	// Resume: offer session resumption (docs/spec/wsmux-resume-v1.md):
	// RESUME in our SETTINGS, sent messages retained until acknowledged,
	// Suspend and Resume. With Splice, retention copies the spliced
	// chunks (the batch's one copy of them). ResumeTimeout bounds a
	// suspension (0: no bound).
	Resume        bool
	ResumeTimeout time.Duration
	// NewStream allocates a stream record, so that a driver can keep it
	// inside its own stream handle (one allocation per stream). Nil: new.
	NewStream func() *Stream

	// lendAbove, for tests: lend Writes' bytes (LendWrite) while more than
	// this many Writes wait (0: when the session send buffer could not
	// give each 16 KiB).
	lendAbove int
}

// The protocol's defaults: what we assume of the peer until its SETTINGS
// arrive.
const (
	DefaultMaxMessageSize       = 1 << 20
	DefaultInitialStreamWindow  = 256 << 10
	DefaultInitialSessionWindow = 1 << 20
	DefaultMaxStreams           = 100
)

// Abuse budgets and scheduling policy (docs/spec).
const (
	pingRate          = 10               // received PINGs per second (token bucket)
	pingBurst         = 50               // bucket size
	pingOutBurst      = 20               // our own PINGs: bucket size (at pingRate), well under a peer's pingBurst
	maxQueuedPingAcks = 2 * pingBurst    // PING ACKs waiting for the writer: never below the burst a peer may send at once
	maxUrgent         = 1000             // urgent queue entries induced by the peer
	budgetWindow      = 10 * time.Second // window of the counters below
	maxYoungResets    = 200              // peer resets of young streams (and resets it provoked) per window
	maxUseless        = 1000             // useless frames per window
	youngStreamAge    = time.Second      // a reset stream younger than this...
	youngStreamBytes  = 1 << 10          // ...with fewer bytes exchanged counts as a rapid reset
	interactiveBytes  = 1 << 10          // a stream with less pending counts as interactive
	agingInteractive  = 8                // bulk gets a frame after this many interactive frames
	rttPingInterval   = 30 * time.Second

	// Shared-connection window cap (flow.SharedCap, docs/protocol-notes.md):
	// once two streams receive DATA within shareGap of each other, for
	// shareHold every stream's receive window is held to one
	// bandwidth-delay product of a sharedRate path at the session's
	// minimum RTT, and no less than sharedFloor. An RTT probe (PING) goes
	// out every shareProbe meanwhile; the minimum RTT is the smallest
	// sample of the session.
	shareGap    = 100 * time.Millisecond
	shareHold   = time.Second
	shareProbe  = 250 * time.Millisecond
	sharedRate  = 625e6    // bytes/s: 5 Gbit/s
	sharedFloor = 64 << 10 // bytes
	// While streams share, the session window is held to twice their cap
	// and no less than sharedSessionFloor (or InitialSessionWindow if
	// larger): enough in flight for the bursts in which many readers drain
	// the connection at once (docs/protocol-notes.md).
	sharedSessionFloor = 4 << 20 // bytes

	// Several streams are receiving (ReceivingMany) while DATA for
	// different streams came in turn within manyWindow.
	manyWindow = 10 * time.Millisecond
)

// The abuse budgets, for tests that cross them.
const (
	PingRate          = pingRate
	PingOutBurst      = pingOutBurst
	MaxQueuedPingAcks = maxQueuedPingAcks
	MaxUrgent         = maxUrgent
	BudgetWindow      = budgetWindow
	MaxYoungResets    = maxYoungResets
	MaxUseless        = maxUseless
)
