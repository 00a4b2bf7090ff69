package fuzz

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/wsmux/wsmux/frame"
	"github.com/wsmux/wsmux/fuzz/internal/program"
	"github.com/wsmux/wsmux/internal/loopback"
	"github.com/wsmux/wsmux/mux"
)

// SessionPair runs two real sessions (client and server) over net.Pipe
// through a program of opens, writes, half-closes, resets, close-reads,
// stalled and resumed readers, pings and pauses, with windows, frame sizes,
// batch sizes, send buffers and stream limits from the program's header
// (FuzzSessionPair). Every stream has a writer and a reader goroutine on each
// side; what a side writes is a pattern that depends on the stream,
// direction and offset, so the reader checks every byte it gets.
//
// It returns an error when:
//
//   - a reader gets a byte that is not the next byte its peer wrote (lost,
//     duplicated, reordered or corrupted data);
//   - on a stream nobody reset or close-read, the reader did not get every
//     byte the writer's Writes accepted followed by io.EOF, or a Write failed;
//   - on any stream, a reader got more than was written;
//   - the headers a stream was opened with are not the ones the other side
//     sees;
//   - either session failed (they are two correct peers), or a stream is
//     still live on either side once every stream ended both ways;
//   - the streams' goroutines or the sessions do not finish in time, or a
//     session does not end cleanly on Close.
func SessionPair(data []byte, clk Clock) error {
	data = data[:len(data):len(data)]
	if len(data) > maxSessionInput {
		return nil
	}
	p := newPair(data, clk)
	return p.run()
}

// SessionPairTCP is SessionPair in real time over a loopback TCP connection
// instead of net.Pipe: the sessions then use the paths only plain sockets
// get, leader reads (a waiting Read reads the socket itself, interrupted by
// resets, close-reads and the session's end) and spliced DATA (vectored
// writes from the send chunks), under the same program and checks.
func SessionPairTCP(data []byte) error {
	data = data[:len(data):len(data)]
	if len(data) > maxSessionInput {
		return nil
	}
	p := newPair(data, Clock{RealTime: true})
	p.tcp = true
	return p.run()
}

// Program header (4 bytes): client config, server config, flags, unused.
// A config byte: bits 0-1 windows (default; 2000/5000 growing to
// 16000/64000; 100/300 fixed; 64 KiB/128 KiB growing to 1/4 MiB), bit 2
// 4 KiB frames and batches, bit 3 small send buffers, bits 4-5 MaxStreams
// (100, 2, 5, 1) with AcceptBacklog 1 when bit 6.
//
// Operations (low 3 bits of the opcode byte):
//
//	0 open       side op>>3&1 opens a stream (header set op>>4&3)
//	1 write      stream u8, side op>>3&1, n u16 bytes
//	2 close      stream u8, side op>>3&1: half-close (after its writes)
//	3 reset      stream u8, side op>>3&1: Reset(0x1000 | u8) now
//	4 stall      stream u8, side op>>3&1: stop (op bit 4 clear) or resume
//	             its reader
//	5 wait       u8 ms << (op>>3 & 7)
//	6 close-read stream u8, side op>>3&1
//	7 misc       side op>>3&1: Ping (op bit 4 clear) or SetInteractive on
//	             stream u8
const (
	pairOpen = iota
	pairWrite
	pairClose
	pairReset
	pairStall
	pairWait
	pairCloseRead
	pairMisc
)

// maxPairBytes bounds the bytes one program writes.
const maxPairBytes = 4 << 20

func pairConfig(sel byte, clk Clock) *mux.Config {
	cfg := &mux.Config{CloseTimeout: 5 * time.Second, OpenTimeout: 3 * time.Second}
	switch sel & 3 {
	case 1:
		cfg.InitialStreamWindow, cfg.InitialSessionWindow = 2000, 5000
		cfg.MaxStreamWindow, cfg.MaxSessionWindow = 16000, 64000
	case 2:
		cfg.InitialStreamWindow, cfg.InitialSessionWindow = 100, 300
		cfg.MaxStreamWindow, cfg.MaxSessionWindow = 100, 300
	case 3:
		cfg.InitialStreamWindow, cfg.InitialSessionWindow = 64<<10, 128<<10
		cfg.MaxStreamWindow, cfg.MaxSessionWindow = 1<<20, 4<<20
	}
	if sel&4 != 0 {
		cfg.MaxFramePayload, cfg.MaxBatch = 4096, 4096
		cfg.MaxMessageSize = 64 << 10
	}
	if sel&8 != 0 {
		cfg.StreamSendBuffer, cfg.SessionSendBuffer = 1000, 3000
	}
	cfg.MaxStreams = [4]int{100, 2, 5, 1}[sel>>4&3]
	if sel&0x40 != 0 {
		cfg.AcceptBacklog = 1
	}
	if clk.RealTime {
		cfg.CloseTimeout = time.Second
		cfg.OpenTimeout = 200 * time.Millisecond
	}
	return cfg
}

type pairCmd struct {
	n     int  // bytes to write
	close bool // half-close
	end   bool // the writer is done
}

// endpoint is one side of one stream.
type endpoint struct {
	p    *pair
	side int // 0 client, 1 server
	rec  *pairStream
	st   *mux.Stream

	cmds    []pairCmd
	cmdCond *sync.Cond
	stalled bool

	written  int64
	werr     error
	closed   bool // a half-close was done: later writes are dropped
	read     int64
	rerr     error
	corrupt  error
	headers  http.Header // what this side sees (accepting side)
	finished bool
}

// pairStream is one stream and both its ends.
type pairStream struct {
	id      uint32
	opener  int
	sent    http.Header
	ends    [2]*endpoint
	aborted bool // reset or close-read by either side
}

type pair struct {
	in    *program.Reader
	clk   Clock
	cfg   [2]*mux.Config
	sess  [2]*mux.Session
	mu    sync.Mutex
	byID  map[uint32]*pairStream
	order []*pairStream
	wg    sync.WaitGroup
	total int
	tcp   bool // over loopback TCP (SessionPairTCP), not net.Pipe
}

func newPair(data []byte, clk Clock) *pair {
	in := program.New(data)
	p := &pair{in: in, clk: clk, byID: map[uint32]*pairStream{}}
	p.cfg[0] = pairConfig(in.U8(), clk)
	p.cfg[1] = pairConfig(in.U8(), clk)
	in.U8()
	in.U8()
	return p
}

func (p *pair) run() error {
	if p.clk.RealTime {
		w := time.AfterFunc(30*time.Second, func() { panic("fuzz.SessionPair: the program hangs") })
		defer w.Stop()
	}
	var a, b net.Conn
	var err error
	if p.tcp {
		if a, b, err = loopback.Pair(); err != nil {
			return err
		}
	} else {
		a, b = net.Pipe()
	}
	if p.sess[0], err = mux.Client(a, p.cfg[0]); err != nil {
		return err
	}
	if p.sess[1], err = mux.Server(b, p.cfg[1]); err != nil {
		return err
	}
	for side := range 2 {
		p.wg.Add(1)
		go p.acceptLoop(side)
	}
	p.program()
	err = p.finish()
	if err != nil {
		p.cleanup()
	}
	return err
}

// cleanup ends everything after a failure, so that the failure is reported
// rather than the goroutines it leaves behind.
func (p *pair) cleanup() {
	p.mu.Lock()
	for _, rec := range p.byID {
		for _, e := range rec.ends {
			e.stalled = false
			e.push(pairCmd{end: true})
		}
	}
	p.mu.Unlock()
	done := make(chan struct{})
	go func() {
		_ = p.sess[0].Close()
		_ = p.sess[1].Close()
		p.wg.Wait()
		close(done)
	}()
	_ = p.wait("cleanup", done, time.Minute)
}

// stream returns the record of id, creating it.
func (p *pair) stream(id uint32, opener int) *pairStream {
	p.mu.Lock()
	defer p.mu.Unlock()
	rec := p.byID[id]
	if rec == nil {
		rec = &pairStream{id: id, opener: opener}
		for side := range 2 {
			rec.ends[side] = &endpoint{p: p, side: side, rec: rec, cmdCond: sync.NewCond(&p.mu)}
		}
		p.byID[id] = rec
	}
	return rec
}

func (p *pair) acceptLoop(side int) {
	defer p.wg.Done()
	for {
		st, err := p.sess[side].AcceptStream(context.Background())
		if err != nil {
			return
		}
		rec := p.stream(st.ID(), 1-side)
		e := rec.ends[side]
		p.mu.Lock()
		e.headers = st.Headers()
		p.mu.Unlock()
		e.start(st)
	}
}

// start runs the endpoint's writer and reader.
func (e *endpoint) start(st *mux.Stream) {
	p := e.p
	p.mu.Lock()
	e.st = st
	p.mu.Unlock()
	p.wg.Add(2)
	go e.writer()
	go e.reader()
}

// key is the pattern key of what side writes on stream id.
func dirKey(id uint32, side int) uint32 { return id<<1 | uint32(side) }

func (e *endpoint) writer() {
	p := e.p
	defer p.wg.Done()
	for {
		p.mu.Lock()
		for len(e.cmds) == 0 {
			e.cmdCond.Wait()
		}
		c := e.cmds[0]
		e.cmds = e.cmds[1:]
		failed := e.werr != nil || e.closed
		if c.close {
			e.closed = true
		}
		off := e.written
		p.mu.Unlock()
		switch {
		case c.end:
			return
		case failed:
		case c.close:
			_ = e.st.CloseWrite()
		default:
			n, err := e.st.Write(pattern(dirKey(e.rec.id, e.side), off, c.n))
			p.mu.Lock()
			e.written += int64(n)
			if err != nil {
				e.werr = err
			}
			p.mu.Unlock()
		}
	}
}

func (e *endpoint) reader() {
	p := e.p
	defer p.wg.Done()
	buf := make([]byte, 8<<10)
	want := make([]byte, 8<<10)
	key := dirKey(e.rec.id, 1-e.side)
	for {
		p.mu.Lock()
		for e.stalled {
			e.cmdCond.Wait()
		}
		off := e.read
		p.mu.Unlock()
		n, err := e.st.Read(buf)
		fillPattern(want[:n], key, off)
		p.mu.Lock()
		if e.corrupt == nil {
			for i := range n {
				if buf[i] != want[i] {
					e.corrupt = fmt.Errorf("stream %d side %d: byte %d is %#x, want %#x", e.rec.id, e.side, off+int64(i), buf[i], want[i])
					break
				}
			}
		}
		e.read += int64(n)
		if err != nil {
			e.rerr = err
			e.finished = true
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
	}
}

// push queues a writer command (p.mu held).
func (e *endpoint) push(c pairCmd) {
	e.cmds = append(e.cmds, c)
	e.cmdCond.Broadcast()
}

func (p *pair) sleep(d time.Duration) {
	if p.clk.RealTime {
		d = min(d, time.Millisecond)
	}
	time.Sleep(d)
}

// pick returns the endpoint of stream k on side, or nil.
func (p *pair) pick(k byte, side int) *endpoint {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.order) == 0 {
		return nil
	}
	return p.order[int(k)%len(p.order)].ends[side]
}

func (p *pair) program() {
	in := p.in
	seq := 0
	for in.More() {
		op := in.U8()
		side := int(op >> 3 & 1)
		switch op & 7 {
		case pairOpen:
			seq++
			h := http.Header{"X-Seq": {strconv.Itoa(seq)}}
			switch op >> 4 & 3 {
			case 1:
				h.Set("Streamtype", "stdin")
				h.Set("X-Stream-Protocol-Version", "v5.channel.k8s.io")
			case 2:
				h.Set("Streamtype", "data")
				h.Set("Port", "8080")
				h["Requestid"] = []string{"1", "2"}
			case 3:
				h = nil
			}
			st, err := p.sess[side].OpenEarly(h)
			if err != nil {
				continue // no credit in time, or a GOAWAY: fine
			}
			rec := p.stream(st.ID(), side)
			p.mu.Lock()
			rec.sent = h
			p.order = append(p.order, rec)
			p.mu.Unlock()
			rec.ends[side].start(st)
		case pairWrite:
			e := p.pick(in.U8(), side)
			n := int(in.U16())
			if e == nil || p.total+n > maxPairBytes {
				continue
			}
			p.total += n
			p.mu.Lock()
			e.push(pairCmd{n: n})
			p.mu.Unlock()
		case pairClose:
			if e := p.pick(in.U8(), side); e != nil {
				p.mu.Lock()
				e.push(pairCmd{close: true})
				p.mu.Unlock()
			}
		case pairReset:
			e := p.pick(in.U8(), side)
			code := frame.ErrorCode(0x1000 | uint32(in.U8()))
			if st := p.started(e); st != nil {
				p.mu.Lock()
				e.rec.aborted = true
				p.mu.Unlock()
				_ = st.Reset(code)
			}
		case pairStall:
			if e := p.pick(in.U8(), side); e != nil {
				p.mu.Lock()
				e.stalled = op&0x10 == 0
				e.cmdCond.Broadcast()
				p.mu.Unlock()
			}
		case pairWait:
			p.sleep(time.Duration(in.U8()) * time.Millisecond << (op >> 3 & 7))
		case pairCloseRead:
			e := p.pick(in.U8(), side)
			if st := p.started(e); st != nil {
				p.mu.Lock()
				e.rec.aborted = true
				p.mu.Unlock()
				_ = st.CloseRead()
			}
		case pairMisc:
			if op&0x10 == 0 {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				_, _ = p.sess[side].Ping(ctx)
				cancel()
			} else if st := p.started(p.pick(in.U8(), side)); st != nil {
				st.SetInteractive(op&0x20 != 0)
			}
		}
	}
}

// started returns e's stream once it exists.
func (p *pair) started(e *endpoint) *mux.Stream {
	if e == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return e.st
}

func (p *pair) wait(what string, ch <-chan struct{}, d time.Duration) error {
	if p.clk.RealTime {
		d = 10 * time.Second
	}
	select {
	case <-ch:
		return nil
	case <-time.After(d):
		return fmt.Errorf("%s did not happen within %v", what, d)
	}
}

func (p *pair) finish() error {
	// Let the last opens arrive, then release every reader and end every
	// writer with a half-close.
	p.sleep(time.Second)
	p.mu.Lock()
	for _, rec := range p.byID {
		for _, e := range rec.ends {
			e.stalled = false
			e.push(pairCmd{close: true})
			e.push(pairCmd{end: true})
			e.cmdCond.Broadcast()
		}
	}
	p.mu.Unlock()
	done := make(chan struct{})
	go func() {
		// Every started endpoint finishes on its own: the writers after
		// their half-close, the readers at the peer's FIN or a reset.
		for {
			p.mu.Lock()
			all := true
			for _, rec := range p.byID {
				for _, e := range rec.ends {
					if e.st != nil && !e.finished {
						all = false
					}
				}
			}
			p.mu.Unlock()
			if all {
				close(done)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	if err := p.wait("every stream ending both ways", done, 10*time.Minute); err != nil {
		return fmt.Errorf("%w: %s", err, p.describe())
	}
	for side, s := range p.sess {
		if err := s.Err(); err != nil {
			return fmt.Errorf("session %d failed: %v", side, err)
		}
	}
	if err := p.check(); err != nil {
		return err
	}
	// Every stream ended both ways: no side keeps one.
	p.sleep(time.Second)
	for side, s := range p.sess {
		if n := s.NumStreams(); n != 0 && !p.clk.RealTime {
			return fmt.Errorf("session %d still has %d live streams after every stream ended: %s", side, n, p.describe())
		}
	}
	closed := make(chan struct{})
	go func() {
		_ = p.sess[0].Close()
		_ = p.sess[1].Close()
		close(closed)
	}()
	if err := p.wait("Close of both sessions", closed, time.Minute); err != nil {
		return err
	}
	all := make(chan struct{})
	go func() {
		p.wg.Wait()
		close(all)
	}()
	if err := p.wait("the end of every goroutine", all, time.Minute); err != nil {
		return err
	}
	for side, s := range p.sess {
		var se *mux.SessionError
		if err := s.Err(); !errors.As(err, &se) || se.Code != frame.NoError {
			return fmt.Errorf("session %d closed with %v", side, err)
		}
	}
	return nil
}

// check compares what every reader got with what its peer wrote.
func (p *pair) check() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, rec := range p.byID {
		if a := rec.ends[1-rec.opener]; a.st != nil {
			if err := headerDiff(a.headers, rec.sent); err != nil {
				return fmt.Errorf("stream %d headers: %v", rec.id, err)
			}
		}
		for side, e := range rec.ends {
			if e.corrupt != nil {
				return e.corrupt
			}
			w := rec.ends[1-side]
			if e.read > w.written {
				return fmt.Errorf("stream %d side %d read %d bytes of %d written", rec.id, side, e.read, w.written)
			}
			if rec.aborted || e.st == nil || w.st == nil {
				continue
			}
			if w.werr != nil {
				return fmt.Errorf("stream %d side %d: Write failed on a stream nobody reset: %v", rec.id, 1-side, w.werr)
			}
			if e.read != w.written || e.rerr != io.EOF {
				return fmt.Errorf("stream %d side %d read %d bytes then %v, the peer wrote %d", rec.id, side, e.read, e.rerr, w.written)
			}
		}
	}
	return nil
}

// describe summarises the streams for a failure message (p.mu not held).
func (p *pair) describe() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := ""
	for _, rec := range p.order {
		s += fmt.Sprintf("[stream %d opener %d aborted %v", rec.id, rec.opener, rec.aborted)
		for side, e := range rec.ends {
			s += fmt.Sprintf(" side%d{started %v written %d werr %v read %d rerr %v finished %v queued %d}",
				side, e.st != nil, e.written, e.werr, e.read, e.rerr, e.finished, len(e.cmds))
		}
		s += "] "
	}
	return s
}
