// Package bridge splices two Kubernetes httpstream connections stream for
// stream, and builds translating HTTP proxies on that: wsmux clients to a
// SPDY server (an unmodified kubelet or CRI runtime) and SPDY clients to a
// wsmux server. This is how a cluster adopts wsmux one hop at a time.
//
// A Splicer forwards every stream its downstream peer opens to the upstream
// connection with the same headers. An upstream rejection rejects the
// downstream stream; a half-close is forwarded as a half-close; a stream
// whose writes fail (the other side reset it) is reset on both sides. When
// upstream closes, everything it sent is delivered downstream before the
// downstream connection is closed (the kubelet writes an exec's exit status
// and then closes); when downstream closes, upstream is closed at once. No
// goroutine outlives Wait.
//
// It imports the httpstream adapter and k8s.io/streaming; it must not import
// anything under cmd/, bench, or a test helper (scripts/check-layers.sh).
package bridge

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	k8shttpstream "k8s.io/streaming/pkg/httpstream"
)

// DrainTimeout bounds how long a Splicer waits, after upstream closed, for
// upstream's remaining data to reach downstream before closing downstream.
const DrainTimeout = 30 * time.Second

// createGrace bounds how long a Splicer whose upstream closed waits for
// stream creations still under way to settle: upstream's reply to a stream
// it accepted precedes its close on the wire, so this is microseconds in
// practice, and a create that upstream never answered (SPDY holds those 30
// s) does not hold the shutdown.
const createGrace = 2 * time.Second

// Splicer forwards the streams of a downstream connection to an upstream
// one. Create it with New, pass NewStreamHandler to whatever creates the
// downstream connection (a ResponseUpgrader or NewServerConnection), then
// call Start with that connection.
type Splicer struct {
	up k8shttpstream.Connection

	mu      sync.Mutex
	down    k8shttpstream.Connection
	closing bool  // no new stream creation starts
	drained bool  // drain waits began: no pump may join them any more
	pending count // upstream CreateStream calls under way
	upWG    count // upstream->downstream pumps (incl. not yet started)
	allWG   count // every pump
	streams int

	downSet chan struct{} // closed by Start
	done    chan struct{}

	toUp, toDown atomic.Int64 // bytes copied each way, every stream
	errMu        sync.Mutex
	errData      []byte // the start of what upstream sent on streams of type "error"
}

// maxErrorData bounds what ErrorData keeps.
const maxErrorData = 4 << 10

// Bytes returns how many bytes the Splicer copied downstream to upstream and
// upstream to downstream, over every stream so far.
func (s *Splicer) Bytes() (toUpstream, toDownstream int64) { return s.toUp.Load(), s.toDown.Load() }

// ErrorData returns the first bytes (up to 4 KiB) upstream sent on streams
// whose streamType header is "error": for exec and attach, the command's
// status (a metav1.Status in JSON from protocol v4 on).
func (s *Splicer) ErrorData() []byte {
	s.errMu.Lock()
	defer s.errMu.Unlock()
	return append([]byte(nil), s.errData...)
}

func (s *Splicer) recordError(p []byte) {
	s.errMu.Lock()
	if room := maxErrorData - len(s.errData); room > 0 {
		s.errData = append(s.errData, p[:min(room, len(p))]...)
	}
	s.errMu.Unlock()
}

// New returns a Splicer whose streams go to up.
func New(up k8shttpstream.Connection) *Splicer {
	return &Splicer{
		up:      up,
		downSet: make(chan struct{}),
		done:    make(chan struct{}),
	}
}

// NewStreamHandler is the downstream connection's NewStreamHandler: it opens
// the same stream upstream (waiting for upstream's answer) and rejects the
// downstream stream if upstream rejects it.
func (s *Splicer) NewStreamHandler(d k8shttpstream.Stream, replySent <-chan struct{}) error {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return errors.New("bridge: connection closing")
	}
	s.pending.Add(1)
	s.mu.Unlock()
	u, err := s.up.CreateStream(d.Headers().Clone())
	// An upstream that accepts the stream and closes at once (a kubelet
	// whose command exits instantly) has set closing by now; the stream is
	// still spliced, and drained, unless the drain waits already began.
	s.mu.Lock()
	late := err == nil && s.drained
	if err == nil && !late {
		s.streams++
		s.allWG.Add(2)
		s.upWG.Add(1)
	}
	s.mu.Unlock()
	s.pending.Done()
	if err != nil {
		return fmt.Errorf("bridge: upstream rejected the stream: %w", err)
	}
	if late {
		_ = u.Reset()
		return errors.New("bridge: connection closing")
	}
	var once sync.Once
	remaining := 2
	var rmu sync.Mutex
	finish := func() {
		rmu.Lock()
		remaining--
		last := remaining == 0
		rmu.Unlock()
		if last {
			once.Do(func() {
				s.up.RemoveStreams(u)
				<-s.downSet
				s.down.RemoveStreams(d)
			})
		}
		s.allWG.Done()
	}
	go func() { // downstream -> upstream
		defer finish()
		pump(u, d, &s.toUp, nil)
	}()
	go func() { // upstream -> downstream, once downstream's reply is out
		defer finish()
		defer s.upWG.Done()
		// The handler accepted, so the reply goes out (or the downstream
		// connection ends, which closes replySent too) promptly; upstream
		// ending meanwhile must not lose what it already sent.
		t := time.NewTimer(DrainTimeout)
		defer t.Stop()
		select {
		case <-replySent:
		case <-t.C:
			_ = u.Reset()
			_ = d.Reset()
			return
		}
		var tap func([]byte)
		if d.Headers().Get("streamType") == "error" {
			tap = s.recordError
		}
		pump(d, u, &s.toDown, tap)
	}()
	return nil
}

// pump copies src to dst. src's end (EOF: half-close, or a reset, which
// reads as EOF through both adapters) half-closes dst; a failed write (dst
// was reset) resets both.
func pump(dst, src k8shttpstream.Stream, count *atomic.Int64, tap func([]byte)) {
	buf := make([]byte, 32<<10)
	for {
		n, rerr := src.Read(buf)
		if n > 0 {
			count.Add(int64(n))
			if tap != nil {
				tap(buf[:n])
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				_ = src.Reset()
				_ = dst.Reset()
				return
			}
		}
		if rerr != nil {
			if rerr == io.EOF {
				_ = dst.Close()
			} else {
				_ = dst.Reset()
				_ = src.Reset()
			}
			return
		}
	}
}

// Start watches both connections once the downstream one exists. It must be
// called exactly once.
func (s *Splicer) Start(down k8shttpstream.Connection) {
	s.mu.Lock()
	s.down = down
	s.mu.Unlock()
	close(s.downSet)
	go s.watch()
}

func (s *Splicer) watch() {
	defer close(s.done)
	select {
	case <-s.up.CloseChan():
		s.markDead()
		// Streams upstream accepted just before it closed are still being
		// registered; then deliver everything upstream sent, then close
		// downstream.
		s.pending.wait(createGrace)
		s.startDrain()
		s.upWG.wait(DrainTimeout)
		_ = s.down.Close()
	case <-s.down.CloseChan():
		s.markDead()
		s.startDrain()
		_ = s.up.Close()
	}
	// Both connections are closed (or closing): every stream read ends.
	_ = s.up.Close()
	_ = s.down.Close()
	s.allWG.wait(DrainTimeout)
}

func (s *Splicer) markDead() {
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
}

// startDrain turns away streams upstream accepts from now on (they are
// reset), so the drain that follows waits only for those already spliced.
func (s *Splicer) startDrain() {
	s.mu.Lock()
	s.drained = true
	s.mu.Unlock()
}

// Close closes both connections; Wait then returns promptly.
func (s *Splicer) Close() {
	s.markDead()
	_ = s.up.Close()
	s.mu.Lock()
	down := s.down
	s.mu.Unlock()
	if down != nil {
		_ = down.Close()
	}
}

// Done is closed when both connections are closed and every pump ended.
func (s *Splicer) Done() <-chan struct{} { return s.done }

// Wait blocks until Done.
func (s *Splicer) Wait() { <-s.done }

// Streams is how many streams were spliced.
func (s *Splicer) Streams() int { s.mu.Lock(); defer s.mu.Unlock(); return s.streams }

// Header names a bridge never forwards upstream: the hop's own upgrade.
var hopHeaders = []string{
	"Connection", "Upgrade", "Keep-Alive", "Proxy-Connection", "Te", "Trailer", "Transfer-Encoding",
	"Sec-Websocket-Key", "Sec-Websocket-Version", "Sec-Websocket-Protocol", "Sec-Websocket-Extensions",
	"Content-Length", k8shttpstream.HeaderProtocolVersion,
}

func forwardHeaders(in http.Header) http.Header {
	out := in.Clone()
	for _, h := range hopHeaders {
		out.Del(h)
	}
	return out
}
