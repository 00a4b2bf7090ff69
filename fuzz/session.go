package fuzz

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/wsmux/wsmux/frame"
	"github.com/wsmux/wsmux/fuzz/internal/program"
	"github.com/wsmux/wsmux/fuzz/wsref"
	"github.com/wsmux/wsmux/mux"
)

// Clock says how a session harness runs. The native targets run inside a
// testing/synctest bubble (fake time: waits cost nothing and a deadlock is
// reported by synctest); go-fuzz entries run in real time, where waits are
// shortened and a watchdog turns a hang into a crash.
type Clock struct {
	// RealTime shortens every wait of the script to at most a millisecond
	// and the session timeouts to what real time can afford.
	RealTime bool
}

// maxSessionInput bounds the scripts the session harnesses look at.
const maxSessionInput = 64 << 10

// Session runs a hostile-peer script (FuzzSession) against a real
// mux.Session over net.Pipe. The script is raw bytes the peer sends: WSMUX/1
// frames cut into WebSocket messages at boundaries the script chooses,
// fragmented or not, masked as a client would (or not, or wrongly), WebSocket
// control frames and raw wire bytes, pauses, and actions of the local
// application (open, write, reset, half-close, stall the readers). See
// sessionScript for the encoding.
//
// It returns an error (or the session panics, crashing the fuzzer) when:
//
//   - the session, or the application goroutines of its streams, do not end
//     in time after Close (a deadlock; under synctest, a leaked goroutine
//     fails the test too);
//   - a stream nobody read holds more than the configured initial stream
//     window, all of them together more than the session window, or the
//     session keeps more live streams than MaxStreams plus those it opened;
//   - a Read or Write of any stream still succeeds, or blocks, after the
//     session ended;
//   - the session ended with a local error whose code is not a defined
//     frame.ErrorCode;
//   - what the session wrote is not valid RFC 6455 for its role (checked by
//     the independent wsref reader), a message does not decode as whole
//     WSMUX/1 frames within the limits the peer announced, its first frame
//     is not SETTINGS, a code it sends is undefined, the ids it opens have
//     the wrong parity or go backwards, or it sent more DATA on a stream or
//     on the session than the peer's windows and WINDOW_UPDATEs allowed.
func Session(data []byte, clk Clock) error {
	data = data[:len(data):len(data)]
	if len(data) > maxSessionInput {
		return nil
	}
	_, err := runHostile(data, clk)
	return err
}

// runHostile is Session that also returns the run, for the seed tests.
func runHostile(data []byte, clk Clock) (*hostile, error) {
	h := newHostile(data, clk)
	return h, h.run()
}

// Script header (2 bytes):
//
//	byte 0: bit 0 the session is the client (else the server); bit 1 send a
//	        valid SETTINGS before the script; bit 2 the peer masks wrongly
//	        (a client that does not mask, a server that does); bits 3-4
//	        configuration profile (0 defaults, 1 tiny windows and limits,
//	        2 a Handler that refuses some streams, 3 short timers); bit 5
//	        the application stalls readers of streams with id%3 == 0 until
//	        the end; bits 6-7 unused.
//	byte 1: the peer's masking key seed.
//
// Then operations, one opcode byte each (low 3 bits the kind) followed by its
// operands; past the end of the input operands read as zero:
//
//	0 message   n u16, n bytes: one binary message of the pending frames
//	            (kind 5) followed by the n bytes, in 1+(op>>3&3) fragments
//	1 control   ping/pong/close (op>>3 % 3), n u8 (at most 125 unless op
//	            bit 7), n bytes
//	2 raw       n u8, n bytes written as they are (any WebSocket framing)
//	3 wait      u8 * 10ms << (op>>3 & 7)
//	4 open      the application opens a stream and writes n u16 bytes
//	5 frame     a WSMUX/1 frame appended to the pending message, kind op>>3&7:
//	            SYN (peer id from u8, header set u8, FIN bit 7), DATA (id u8,
//	            n u16, FIN bit 7), WINDOW_UPDATE (id u8, delta u32),
//	            RST_STREAM (id u8, code u8), STOP_SENDING (id u8, code u8),
//	            PING (opaque u8, ACK bit 7), GOAWAY (last u8, code u8),
//	            MAX_STREAMS (u32) or, with bit 7, SETTINGS (n u8 pairs u8 u32)
//	6 app       on stream u8 (mod the streams known): reset, half-close,
//	            close-read or expire the read deadline (op>>3 & 3)
//	7 flush     the pending frames as one message
const (
	opMessage = iota
	opControl
	opRaw
	opWait
	opOpen
	opFrame
	opApp
	opFlush
)

// sessionConfig returns the profile's Config.
func sessionConfig(profile byte, clk Clock, h *hostile) *mux.Config {
	cfg := &mux.Config{CloseTimeout: 2 * time.Second, OpenTimeout: 3 * time.Second}
	switch profile {
	case 1:
		cfg.MaxFramePayload = 4096
		cfg.MaxHeaderBytes = 1024
		cfg.InitialStreamWindow = 1000
		cfg.MaxStreamWindow = 8000
		cfg.InitialSessionWindow = 3000
		cfg.MaxSessionWindow = 20000
		cfg.MaxStreams = 3
		cfg.AcceptBacklog = 2
		cfg.StreamSendBuffer = 2000
		cfg.SessionSendBuffer = 5000
		cfg.MaxBatch = 4096
		cfg.MaxMessageSize = 64 << 10
	case 2:
		cfg.HandlerConcurrency = 2
		cfg.Handler = func(st *mux.Stream) error {
			if st.ID()%4 == 3 || st.Headers().Get("X-Refuse") != "" {
				return &mux.StreamError{Code: 0x1001, Reason: "refused by the fuzz handler"}
			}
			h.serve(st)
			return nil
		}
	case 3:
		cfg.KeepAliveInterval = time.Second
		cfg.KeepAliveTimeout = 3 * time.Second
		cfg.IdleTimeout = 4 * time.Second
		cfg.SettingsTimeout = 500 * time.Millisecond
		cfg.OpenTimeout = 2 * time.Second
	}
	if clk.RealTime {
		cfg.CloseTimeout = 200 * time.Millisecond
		cfg.OpenTimeout = 100 * time.Millisecond
	}
	return cfg
}

// hostile is one run of a Session script.
type hostile struct {
	in     *program.Reader
	clk    Clock
	client bool // the session's role
	cfg    *mux.Config
	sess   *mux.Session
	conn   net.Conn // the peer's end
	key    [4]byte
	mask   bool // the peer masks its frames
	stall  bool
	pend   []byte
	werr   error // the peer's write failed: the session closed the connection

	// model of the peer's settings and the credit it granted
	model *creditModel

	mu       sync.Mutex
	streams  []*mux.Stream
	opened   int // streams the application opened
	errs     []error
	wg       sync.WaitGroup
	release  chan struct{}
	stalledN map[uint32]int // bytes read from stalled streams
	wire     []byte         // what the session wrote
	wireDone chan struct{}
}

func newHostile(data []byte, clk Clock) *hostile {
	in := program.New(data)
	flags := in.U8()
	seed := in.U8()
	h := &hostile{
		in:       in,
		clk:      clk,
		client:   flags&1 != 0,
		stall:    flags&0x20 != 0,
		release:  make(chan struct{}),
		stalledN: map[uint32]int{},
		wireDone: make(chan struct{}),
		model:    newCreditModel(),
	}
	h.key = [4]byte{seed, seed ^ 0x5a, seed + 1, ^seed}
	h.mask = !h.client // a client peer masks
	if flags&4 != 0 {
		h.mask = !h.mask
	}
	h.cfg = sessionConfig(flags>>3&3, clk, h)
	if flags&2 != 0 {
		var s frame.Settings
		h.pend = frame.AppendSettings(h.pend, &s)
	}
	return h
}

func (h *hostile) fail(format string, args ...any) {
	h.mu.Lock()
	h.errs = append(h.errs, fmt.Errorf(format, args...))
	h.mu.Unlock()
}

func (h *hostile) firstErr() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.errs) > 0 {
		return h.errs[0]
	}
	return nil
}

func (h *hostile) run() error {
	if h.clk.RealTime {
		w := time.AfterFunc(20*time.Second, func() { panic("fuzz.Session: the script hangs") })
		defer w.Stop()
	}
	a, b := net.Pipe()
	h.conn = a
	var err error
	if h.client {
		h.sess, err = mux.Client(b, h.cfg)
	} else {
		h.sess, err = mux.Server(b, h.cfg)
	}
	if err != nil {
		return fmt.Errorf("session: %v", err)
	}
	go h.readWire()
	if h.cfg.Handler == nil {
		h.wg.Add(1)
		go h.acceptLoop()
	}
	h.script()
	return h.finish()
}

// readWire keeps what the session writes (up to 8 MiB) until it closes the
// connection.
func (h *hostile) readWire() {
	defer close(h.wireDone)
	buf := make([]byte, 32<<10)
	for {
		n, err := h.conn.Read(buf)
		h.mu.Lock()
		if len(h.wire)+n <= 8<<20 {
			h.wire = append(h.wire, buf[:n]...)
		} else {
			h.model.loseCredit() // too much to check
		}
		closed := false
		if h.clk.RealTime && len(h.wire) < 1<<20 {
			// Answer the session's close at once rather than let it
			// linger for CloseTimeout: real time is dear under go-fuzz.
			closed = wsref.Read(h.wire, h.client, 1<<30).End.Err == wsref.ErrClose
		}
		h.mu.Unlock()
		if err != nil || closed {
			_ = h.conn.Close()
		}
		if err != nil {
			return
		}
	}
}

func (h *hostile) acceptLoop() {
	defer h.wg.Done()
	for {
		st, err := h.sess.AcceptStream(context.Background())
		if err != nil {
			return
		}
		h.serve(st)
	}
}

// serve runs the application side of a stream the peer opened: read to the
// end (after the release, for a stalled stream), then reply and half-close.
func (h *hostile) serve(st *mux.Stream) {
	h.mu.Lock()
	h.streams = append(h.streams, st)
	h.mu.Unlock()
	stalled := h.stall && st.ID()%3 == 0
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		if stalled {
			<-h.release
		}
		n, _ := io.Copy(io.Discard, st)
		if stalled {
			h.mu.Lock()
			h.stalledN[st.ID()] = int(n)
			h.mu.Unlock()
		}
		_, _ = st.Write([]byte("reply"))
		_ = st.Close()
	}()
}

// open is the application opening a stream and writing n bytes.
func (h *hostile) open(n int) {
	h.mu.Lock()
	h.opened++
	k := h.opened
	h.mu.Unlock()
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		hdr := http.Header{"Streamtype": {"stdin"}, "X-Seq": {strconv.Itoa(k)}}
		st, err := h.sess.OpenEarly(hdr)
		if err != nil {
			return
		}
		h.mu.Lock()
		h.streams = append(h.streams, st)
		h.mu.Unlock()
		_, _ = st.Write(pattern(uint32(k), 0, n))
		_ = st.Close()
		_, _ = io.Copy(io.Discard, st)
	}()
}

func (h *hostile) sleep(d time.Duration) {
	if h.clk.RealTime {
		d = min(d, time.Millisecond)
	}
	time.Sleep(d)
}

// write puts raw bytes on the wire.
func (h *hostile) write(b []byte) {
	if h.werr != nil || len(b) == 0 {
		return
	}
	if _, err := h.conn.Write(b); err != nil {
		h.werr = err
	}
}

// message sends payload as one binary message in parts fragments.
func (h *hostile) message(payload []byte, parts int) {
	h.mu.Lock()
	h.model.peerMessage(payload)
	h.mu.Unlock()
	var out []byte
	size := (len(payload) + parts - 1) / parts
	for i := 0; i < parts; i++ {
		end := min(len(payload), (i+1)*size)
		start := min(len(payload), i*size)
		op := byte(2)
		if i > 0 {
			op = 0
		}
		out = wsref.AppendFrame(out, i == parts-1, op, h.mask, h.key, payload[start:end])
	}
	h.write(out)
}

func (h *hostile) script() {
	in := h.in
	for in.More() && h.werr == nil {
		op := in.U8()
		switch op & 7 {
		case opMessage:
			payload := append(h.pend, in.Bytes(int(in.U16()))...)
			h.pend = nil
			h.message(payload, 1+int(op>>3&3))
		case opControl:
			n := int(in.U8())
			if op&0x80 == 0 {
				n %= 126
			}
			p := in.Bytes(n)
			code := [3]byte{9, 10, 8}[int(op>>3)%3]
			if code == 8 {
				h.mu.Lock()
				h.model.loseCredit() // the session may stop before it reads the rest
				h.mu.Unlock()
			}
			h.write(wsref.AppendFrame(nil, true, code, h.mask, h.key, p))
		case opRaw:
			p := in.Bytes(int(in.U8()))
			h.mu.Lock()
			h.model.loseRaw()
			h.mu.Unlock()
			h.write(p)
		case opWait:
			h.sleep(time.Duration(in.U8()) * 10 * time.Millisecond << (op >> 3 & 7))
			h.checkLive()
		case opOpen:
			h.open(int(in.U16()))
		case opFrame:
			h.frame(op)
		case opApp:
			h.app(op, in.U8())
		case opFlush:
			if len(h.pend) > 0 {
				p := h.pend
				h.pend = nil
				h.message(p, 1)
			}
		}
	}
	if len(h.pend) > 0 {
		h.message(h.pend, 1)
		h.pend = nil
	}
}

// peerID maps k to a stream id of the peer's parity.
func (h *hostile) peerID(k byte) uint32 {
	if h.client { // the peer is the server: even ids
		return 2*uint32(k) + 2
	}
	return 2*uint32(k) + 1
}

// headerSets are the header blocks SYN frames carry.
var headerSets = []http.Header{
	nil,
	{"Streamtype": {"error"}},
	{"Streamtype": {"stdout"}, "X-Stream-Protocol-Version": {"v5.channel.k8s.io"}},
	{"Streamtype": {"data"}, "Port": {"8080"}, "Requestid": {"0"}},
	{"X-Refuse": {"1"}},
}

func (h *hostile) frame(op byte) {
	in := h.in
	bit7 := op&0x80 != 0
	var b []byte
	var err error
	switch op >> 3 & 7 {
	case 0:
		id := h.peerID(in.U8())
		var block []byte
		hs := headerSets[int(in.U8())%len(headerSets)]
		if len(hs) > 0 {
			lim := frame.DefaultBlockLimits()
			block, _ = frame.AppendHeaderBlock(nil, hs, &lim)
		}
		flags := frame.FlagSYN
		if bit7 {
			flags |= frame.FlagFIN
		}
		b, err = frame.AppendHeadersBlock(h.pend, id, flags, block)
	case 1:
		id := uint32(in.U8())
		n := int(in.U16())
		b, err = frame.AppendData(h.pend, id, bit7, pattern(id, 0, n))
	case 2:
		b, err = frame.AppendWindowUpdate(h.pend, uint32(in.U8()), in.U32())
	case 3:
		b, err = frame.AppendRSTStream(h.pend, uint32(in.U8()), frame.ErrorCode(in.U8()), "")
	case 4:
		b, err = frame.AppendStopSending(h.pend, uint32(in.U8()), frame.ErrorCode(in.U8()))
	case 5:
		b = frame.AppendPing(h.pend, bit7, uint32(in.U8()))
	case 6:
		b, err = frame.AppendGoAway(h.pend, uint32(in.U8()), frame.ErrorCode(in.U8()), "")
	case 7:
		if !bit7 {
			b, err = frame.AppendMaxStreams(h.pend, in.U32())
			break
		}
		var s frame.Settings
		for n := in.U8() % 9; n > 0; n-- {
			_ = s.Set(frame.SettingID(in.U8()%9), in.U32())
		}
		b = frame.AppendSettings(h.pend, &s)
	}
	if err == nil {
		h.pend = b
	}
}

func (h *hostile) app(op, idx byte) {
	h.mu.Lock()
	if len(h.streams) == 0 {
		h.mu.Unlock()
		return
	}
	st := h.streams[int(idx)%len(h.streams)]
	h.mu.Unlock()
	switch op >> 3 & 3 {
	case 0:
		_ = st.Reset(frame.Cancel)
	case 1:
		_ = st.CloseWrite()
	case 2:
		_ = st.CloseRead()
	case 3:
		_ = st.SetReadDeadline(time.Now().Add(-time.Second))
	}
}
