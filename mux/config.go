package mux

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/wsmux/wsmux/frame"
	"github.com/wsmux/wsmux/mux/internal/engine"
)

// Config tunes a Session. A nil *Config means DefaultConfig(); zero fields of
// a non-nil Config take their defaults too, so callers set only what they
// change. A Config must not be modified after it was passed to a Session.
type Config struct {
	// MaxFramePayload is the largest DATA payload we accept (announced in
	// SETTINGS). Default 16 KiB; range 4 KiB..65535.
	MaxFramePayload int
	// MaxHeaderBytes is the largest header block we accept. Default 8 KiB;
	// range 1 KiB..65535.
	MaxHeaderBytes int
	// InitialStreamWindow is each stream's initial receive window.
	// Default 256 KiB.
	InitialStreamWindow int
	// MaxStreamWindow caps a stream window's auto-tuning. Default 16 MiB.
	MaxStreamWindow int
	// InitialSessionWindow is the session's initial receive window.
	// Default 1 MiB.
	InitialSessionWindow int
	// MaxSessionWindow caps the session window (which is kept at least twice
	// the largest stream window) and the growth of all windows together.
	// Default 64 MiB.
	MaxSessionWindow int
	// MaxStreams is how many peer-opened streams may be open at once
	// (cumulative MAX_STREAMS credit). A slot comes back only when a stream
	// has ended both ways and was accepted or handled. Default 100.
	MaxStreams int
	// AcceptBacklog bounds peer-opened streams waiting for Accept (or a
	// handler); more are refused with RST_STREAM(REFUSED_STREAM), and the
	// slot of each refused stream comes back only as a stream leaves the
	// backlog, so a peer that opens faster than the application takes
	// streams is slowed to its pace. Default 64.
	AcceptBacklog int
	// MaxMessageSize is the largest WebSocket message we accept. Default
	// 1 MiB; at least 64 KiB.
	MaxMessageSize int
	// KeepAliveInterval: a PING is sent when nothing was sent for this
	// long. Default 15 s. Negative disables keepalive (and KeepAliveTimeout).
	KeepAliveInterval time.Duration
	// KeepAliveTimeout: the peer is dead when nothing at all was received
	// for this long (GOAWAY KEEPALIVE_TIMEOUT). Default 45 s.
	KeepAliveTimeout time.Duration
	// IdleTimeout closes the session (GOAWAY IDLE_TIMEOUT) after this long
	// without DATA or HEADERS either way. Default 0: off. See
	// Session.SetIdleTimeout.
	IdleTimeout time.Duration
	// OpenTimeout bounds Session.Open's wait for the peer's answer.
	// Default 30 s.
	OpenTimeout time.Duration
	// WriteTimeout bounds each write to the connection; a write that makes
	// no progress for this long ends the session. Default 30 s.
	WriteTimeout time.Duration
	// CloseTimeout bounds Session.Close and a GOAWAY drain. Default 30 s.
	CloseTimeout time.Duration
	// SettingsTimeout: the peer's SETTINGS must arrive within this long
	// (else SETTINGS_TIMEOUT). Default 5 s.
	SettingsTimeout time.Duration
	// ReadTimeout bounds the arrival of one WebSocket message: once its
	// first byte came, the whole message (every fragment of it) must be
	// there within this long, else the session ends with GOAWAY
	// KEEPALIVE_TIMEOUT (a peer that stops or dribbles in the middle of a
	// frame: slowloris). It does not bound the time between messages (see
	// KeepAliveTimeout and IdleTimeout). Default 30 s; negative disables it.
	ReadTimeout time.Duration
	// StallTimeout ends the session with GOAWAY STALL_TIMEOUT when we have
	// data queued and the peer's session window stayed at zero for this long
	// (slow read, CVE-2019-9517): any session WINDOW_UPDATE restarts the
	// clock. A peer that is dead rather than stalling is found earlier by
	// the keepalive (KEEPALIVE_TIMEOUT). A stream window at zero alone
	// never triggers it (a paused reader is legitimate); Stream write
	// deadlines bound that. Default 2 min; negative disables it.
	StallTimeout time.Duration
	// StreamSendBuffer bounds the bytes a stream may have queued but not
	// yet written. Default 256 KiB.
	StreamSendBuffer int
	// SessionSendBuffer bounds the bytes of all streams queued but not yet
	// written. Default 1 MiB. Writes that find it full wait in turn, first
	// come first served, and their bytes are queued as room frees.
	SessionSendBuffer int
	// MaxBatch bounds one WebSocket message (one write) of the writer.
	// Default 256 KiB.
	MaxBatch int
	// Handler, when set, is called for every stream the peer opens, on a
	// bounded pool of goroutines (never on the read loop). A nil return
	// accepts the stream: its HEADERS ACK is queued and Stream.Accepted
	// closes once the ACK was written. An error refuses it with
	// RST_STREAM(REFUSED_STREAM), or with the code of a returned
	// *StreamError. With a Handler, Accept never returns a stream.
	//
	// Without a Handler, peer streams are acknowledged as soon as they
	// arrive (so optimistic opens never wait for the application) and
	// queue for Accept.
	Handler func(*Stream) error
	// HandlerConcurrency bounds the goroutines running Handler; they exit
	// when there is no work. Default 64.
	HandlerConcurrency int
	// Logger, when set, receives session-level events (protocol errors,
	// timeouts). The library never logs otherwise.
	Logger *slog.Logger
	// Driver selects which goroutines move bytes between the connection
	// and the streams (every driver runs the same protocol engine). The
	// default is DriverFastPaths, or what the WSMUX_DRIVER environment
	// variable names ("fastpaths", "goroutines", "eventloop"), read once.
	Driver Driver
	// Resume offers session resumption (docs/spec/wsmux-resume-v1.md):
	// when both sides set it, a dropped connection suspends the session
	// instead of ending it, the client redials (Dialer.Dial sessions) and
	// both replay what the other did not receive. A resumable session
	// runs on the driver Driver selects, the event loop included (a
	// suspended one holds no goroutine there). A server also needs
	// ResumeRegistry.
	Resume bool
	// ResumeTimeout bounds a suspension; default 30 s.
	ResumeTimeout time.Duration
	// ResumeRegistry is the server's table of resumable sessions (Upgrade
	// registers them and routes resume requests to them).
	ResumeRegistry *ResumeRegistry
	// OnResumeEvent, if set, is called for every suspension and every
	// resume of a resumable session, and on the client for every redial
	// that was refused or failed (ResumeEvent.Kind, with its attempt and
	// status), in order, from a goroutine of the session's own and never
	// with its lock held: it may call the session's methods, and the
	// next event waits until it returns. A final refusal (Final) ends the
	// session; a resume timeout is no event: Done and Err report it.
	OnResumeEvent func(*Session, ResumeEvent)
}

// Default values of Config (DefaultConfig returns them all).
const (
	defaultMaxFramePayload      = 16 << 10
	defaultMaxHeaderBytes       = 8 << 10
	defaultInitialStreamWindow  = engine.DefaultInitialStreamWindow
	defaultMaxStreamWindow      = 16 << 20
	defaultInitialSessionWindow = engine.DefaultInitialSessionWindow
	defaultMaxSessionWindow     = 64 << 20
	defaultMaxStreams           = engine.DefaultMaxStreams
	defaultAcceptBacklog        = 64
	defaultMaxMessageSize       = engine.DefaultMaxMessageSize
	defaultKeepAliveInterval    = 15 * time.Second
	defaultKeepAliveTimeout     = 45 * time.Second
	defaultOpenTimeout          = 30 * time.Second
	defaultWriteTimeout         = 30 * time.Second
	defaultCloseTimeout         = 30 * time.Second
	defaultSettingsTimeout      = 5 * time.Second
	defaultReadTimeout          = 30 * time.Second
	defaultStallTimeout         = 2 * time.Minute
	defaultStreamSendBuffer     = 256 << 10
	defaultSessionSendBuffer    = 1 << 20
	defaultMaxBatch             = 256 << 10
	defaultHandlerConcurrency   = 64
)

// closeLinger bounds the wait for the peer's close after ours.
const closeLinger = 2 * time.Second

// DefaultConfig returns a Config with every field at its default.
func DefaultConfig() *Config {
	return &Config{
		MaxFramePayload:      defaultMaxFramePayload,
		MaxHeaderBytes:       defaultMaxHeaderBytes,
		InitialStreamWindow:  defaultInitialStreamWindow,
		MaxStreamWindow:      defaultMaxStreamWindow,
		InitialSessionWindow: defaultInitialSessionWindow,
		MaxSessionWindow:     defaultMaxSessionWindow,
		MaxStreams:           defaultMaxStreams,
		AcceptBacklog:        defaultAcceptBacklog,
		MaxMessageSize:       defaultMaxMessageSize,
		KeepAliveInterval:    defaultKeepAliveInterval,
		KeepAliveTimeout:     defaultKeepAliveTimeout,
		OpenTimeout:          defaultOpenTimeout,
		WriteTimeout:         defaultWriteTimeout,
		CloseTimeout:         defaultCloseTimeout,
		SettingsTimeout:      defaultSettingsTimeout,
		ReadTimeout:          defaultReadTimeout,
		StallTimeout:         defaultStallTimeout,
		StreamSendBuffer:     defaultStreamSendBuffer,
		SessionSendBuffer:    defaultSessionSendBuffer,
		MaxBatch:             defaultMaxBatch,
		HandlerConcurrency:   defaultHandlerConcurrency,
	}
}

// withDefaults returns a copy of c (nil allowed) with zero fields defaulted.
func (c *Config) withDefaults() *Config {
	d := DefaultConfig()
	if c == nil {
		return d
	}
	n := *c
	setInt := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	setDur := func(p *time.Duration, v time.Duration) {
		if *p == 0 {
			*p = v
		}
	}
	setInt(&n.MaxFramePayload, d.MaxFramePayload)
	setInt(&n.MaxHeaderBytes, d.MaxHeaderBytes)
	setInt(&n.InitialStreamWindow, d.InitialStreamWindow)
	setInt(&n.MaxStreamWindow, d.MaxStreamWindow)
	setInt(&n.InitialSessionWindow, d.InitialSessionWindow)
	setInt(&n.MaxSessionWindow, d.MaxSessionWindow)
	setInt(&n.MaxStreams, d.MaxStreams)
	setInt(&n.AcceptBacklog, d.AcceptBacklog)
	setInt(&n.MaxMessageSize, d.MaxMessageSize)
	setDur(&n.KeepAliveInterval, d.KeepAliveInterval)
	setDur(&n.KeepAliveTimeout, d.KeepAliveTimeout)
	setDur(&n.OpenTimeout, d.OpenTimeout)
	setDur(&n.WriteTimeout, d.WriteTimeout)
	setDur(&n.CloseTimeout, d.CloseTimeout)
	setDur(&n.SettingsTimeout, d.SettingsTimeout)
	setDur(&n.ReadTimeout, d.ReadTimeout)
	setDur(&n.StallTimeout, d.StallTimeout)
	setInt(&n.StreamSendBuffer, d.StreamSendBuffer)
	setInt(&n.SessionSendBuffer, d.SessionSendBuffer)
	setInt(&n.MaxBatch, d.MaxBatch)
	setInt(&n.HandlerConcurrency, d.HandlerConcurrency)
	if n.MaxStreamWindow < n.InitialStreamWindow {
		n.MaxStreamWindow = n.InitialStreamWindow
	}
	if n.MaxSessionWindow < n.InitialSessionWindow {
		n.MaxSessionWindow = n.InitialSessionWindow
	}
	if n.Resume && n.ResumeTimeout <= 0 {
		n.ResumeTimeout = defaultResumeTimeout
	}
	return &n
}

// sessionConfig is the last Config a session was started with and its
// defaulted copy: sessions started with equal Configs (a server passing the
// same one to every Upgrade) share one copy instead of holding one each.
type sessionConfig struct {
	given     Config
	defaulted *Config
}

var (
	lastSessionConfig    atomic.Pointer[sessionConfig]
	defaultSessionConfig = sync.OnceValue(DefaultConfig)
)

// forSession returns c with its defaults applied, for a Session to keep:
// shared, never modified. It is the copy made for the last equal Config
// when there is one (equal in every field, the Handler, Logger and
// ResumeRegistry being the same ones), a new copy otherwise.
func (c *Config) forSession() *Config {
	if c == nil {
		return defaultSessionConfig()
	}
	if last := lastSessionConfig.Load(); last != nil && sameConfig(&last.given, c) {
		return last.defaulted
	}
	d := c.withDefaults()
	lastSessionConfig.Store(&sessionConfig{given: *c, defaulted: d})
	return d
}

// sameConfig reports whether a and b hold the same bits: every value
// field equal and every func and pointer field the same one. (Config holds
// a func, so == does not compile; a difference in padding only makes
// forSession copy again.)
func sameConfig(a, b *Config) bool {
	const n = unsafe.Sizeof(Config{})
	return *(*[n]byte)(unsafe.Pointer(a)) == *(*[n]byte)(unsafe.Pointer(b))
}

// Validate reports the first invalid field of c after defaults are applied.
// A nil Config is valid.
func (c *Config) Validate() error {
	n := c.withDefaults()
	const maxWin = 1<<31 - 1
	switch {
	case n.MaxFramePayload < frame.MinMaxDataPayload || n.MaxFramePayload > frame.MaxPayload:
		return fmt.Errorf("mux: MaxFramePayload %d outside %d..%d", n.MaxFramePayload, frame.MinMaxDataPayload, frame.MaxPayload)
	case n.MaxHeaderBytes < 1024 || n.MaxHeaderBytes > frame.MaxPayload:
		return fmt.Errorf("mux: MaxHeaderBytes %d outside 1024..%d", n.MaxHeaderBytes, frame.MaxPayload)
	case n.InitialStreamWindow < 0 || n.MaxStreamWindow > maxWin:
		return errors.New("mux: stream window out of range")
	case n.InitialSessionWindow < 0 || n.MaxSessionWindow > maxWin:
		return errors.New("mux: session window out of range")
	case n.InitialSessionWindow < n.InitialStreamWindow:
		return errors.New("mux: InitialSessionWindow below InitialStreamWindow")
	case n.MaxStreams < 0 || n.MaxStreams > frame.MaxCredit:
		return errors.New("mux: MaxStreams out of range")
	case n.AcceptBacklog < 0:
		return errors.New("mux: negative AcceptBacklog")
	case n.MaxMessageSize < 64<<10 || n.MaxMessageSize > maxWin:
		return errors.New("mux: MaxMessageSize below 64 KiB")
	case n.MaxMessageSize < n.MaxFramePayload+frame.HeaderSize:
		return errors.New("mux: MaxMessageSize below one full DATA frame")
	case n.KeepAliveInterval > 0 && n.KeepAliveTimeout > 0 && n.KeepAliveTimeout <= n.KeepAliveInterval:
		return errors.New("mux: KeepAliveTimeout must exceed KeepAliveInterval")
	case n.IdleTimeout < 0 || n.OpenTimeout < 0 || n.WriteTimeout < 0 || n.CloseTimeout < 0 || n.SettingsTimeout < 0:
		return errors.New("mux: negative timeout")
	case n.StreamSendBuffer < 0 || n.SessionSendBuffer < 0:
		return errors.New("mux: negative send buffer")
	case n.MaxBatch < 4<<10:
		return errors.New("mux: MaxBatch below 4 KiB")
	case n.Driver > DriverEventLoop:
		return fmt.Errorf("mux: unknown Driver %d", n.Driver)
	case n.HandlerConcurrency < 0:
		return errors.New("mux: negative HandlerConcurrency")
	}
	return nil
}

// engineConfig is what the engine needs of c (defaults applied).
func (c *Config) engineConfig() engine.Config {
	return engine.Config{
		MaxFramePayload:      c.MaxFramePayload,
		MaxHeaderBytes:       c.MaxHeaderBytes,
		InitialStreamWindow:  c.InitialStreamWindow,
		MaxStreamWindow:      c.MaxStreamWindow,
		InitialSessionWindow: c.InitialSessionWindow,
		MaxSessionWindow:     c.MaxSessionWindow,
		MaxStreams:           c.MaxStreams,
		AcceptBacklog:        c.AcceptBacklog,
		MaxMessageSize:       c.MaxMessageSize,
		KeepAliveInterval:    c.KeepAliveInterval,
		KeepAliveTimeout:     c.KeepAliveTimeout,
		IdleTimeout:          c.IdleTimeout,
		CloseTimeout:         c.CloseTimeout,
		SettingsTimeout:      c.SettingsTimeout,
		ReadTimeout:          c.ReadTimeout,
		StallTimeout:         c.StallTimeout,
		StreamSendBuffer:     c.StreamSendBuffer,
		SessionSendBuffer:    c.SessionSendBuffer,
		MaxBatch:             c.MaxBatch,
		Handler:              c.Handler != nil,
		Resume:               c.Resume,
		ResumeTimeout:        c.ResumeTimeout,
	}
}
