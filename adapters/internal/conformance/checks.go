package conformance

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	k8shttpstream "k8s.io/streaming/pkg/httpstream"
)

// Check names, for Known tables.
const (
	CreateStreamWaitsForReply        = "CreateStreamWaitsForReply"
	HeadersCarried                   = "HeadersCarried"
	HandlerErrorRejects              = "HandlerErrorRejects"
	ReplySentAfterReply              = "ReplySentAfterReply"
	CloseIsHalfClose                 = "CloseIsHalfClose"
	ResetSeenByPeer                  = "ResetSeenByPeer"
	ConnectionCloseResetsAll         = "ConnectionCloseResetsAll"
	CreateStreamAfterConnClosed      = "CreateStreamAfterConnClosed"
	PendingCreateStreamFailsPromptly = "PendingCreateStreamFailsPromptly"
	IdleTimeoutCloses                = "IdleTimeoutCloses"
	RemoveStreamsByID                = "RemoveStreamsByID"
	Identifiers                      = "Identifiers"
	DataBeforeResetDelivered         = "DataBeforeResetDelivered"
	DataBeforeConnCloseDelivered     = "DataBeforeConnCloseDelivered"
	ZeroLengthWrite                  = "ZeroLengthWrite"
	LargeWrite                       = "LargeWrite32MiB"
	Concurrent64x1MiB                = "Concurrent64x1MiB"
	SlowReaderIsolation              = "SlowReaderIsolation"
	FlowControlBound                 = "FlowControlBound"
)

// Checks returns the suite.
func Checks() []Check {
	return []Check{
		{Name: CreateStreamWaitsForReply, Handler: slowHandler, Run: runCreateStreamWaits},
		{Name: HeadersCarried, Run: runHeadersCarried},
		{Name: HandlerErrorRejects, Handler: rejectHandler, Run: runHandlerErrorRejects},
		{Name: ReplySentAfterReply, Handler: replySentHandler, Run: runReplySentAfterReply},
		{Name: CloseIsHalfClose, Run: runCloseIsHalfClose},
		{Name: ResetSeenByPeer, Run: runResetSeenByPeer},
		{Name: ConnectionCloseResetsAll, Run: runConnectionCloseResetsAll},
		{Name: CreateStreamAfterConnClosed, Run: runCreateStreamAfterConnClosed},
		{Name: PendingCreateStreamFailsPromptly, Handler: blockingHandler, Run: runPendingCreateStream},
		{Name: IdleTimeoutCloses, Run: runIdleTimeout},
		{Name: RemoveStreamsByID, Run: runRemoveStreams},
		{Name: Identifiers, Run: runIdentifiers},
		{Name: DataBeforeResetDelivered, Run: runDataBeforeReset},
		{Name: DataBeforeConnCloseDelivered, Run: runDataBeforeConnClose},
		{Name: ZeroLengthWrite, Run: runZeroLengthWrite},
		{Name: LargeWrite, Run: runLargeWrite, Timeout: 90 * time.Second},
		{Name: Concurrent64x1MiB, Run: runConcurrent, Timeout: 120 * time.Second},
		{Name: SlowReaderIsolation, Run: runSlowReaderIsolation, Timeout: 90 * time.Second},
		{Name: FlowControlBound, Run: runFlowControlBound},
	}
}

const handlerDelay = 300 * time.Millisecond

func slowHandler(e *Env, s k8shttpstream.Stream, _ <-chan struct{}) error {
	time.Sleep(handlerDelay)
	e.Set("handlerReturned", time.Now())
	e.Accepted <- s
	return nil
}

func runCreateStreamWaits(e *Env) error {
	start := time.Now()
	c, err := e.Client.CreateStream(http.Header{"X-A": {"1"}})
	if err != nil {
		return err
	}
	defer c.Reset()
	returned := time.Now()
	hr, _ := e.Get("handlerReturned").(time.Time)
	if hr.IsZero() {
		return errors.New("CreateStream returned before the server handler returned")
	}
	if returned.Before(hr) || returned.Sub(start) < handlerDelay {
		return fmt.Errorf("CreateStream returned after %v, before the %v handler finished", returned.Sub(start), handlerDelay)
	}
	return nil
}

func runHeadersCarried(e *Env) error {
	h := http.Header{}
	h.Set("streamType", "data")
	h.Set("port", "8080")
	h.Add("X-Multi", "a")
	h.Add("X-Multi", "b")
	c, err := e.Client.CreateStream(h)
	if err != nil {
		return err
	}
	defer c.Reset()
	s, err := e.AcceptOne(5 * time.Second)
	if err != nil {
		return err
	}
	sh := s.Headers()
	if sh.Get("streamType") != "data" || sh.Get("port") != "8080" {
		return fmt.Errorf("server headers %v", sh)
	}
	if m := sh.Values("X-Multi"); len(m) != 2 || m[0] != "a" || m[1] != "b" {
		return fmt.Errorf("multi-valued header: %q", m)
	}
	if c.Headers().Get("streamType") != "data" {
		return fmt.Errorf("client stream Headers() = %v, want the headers it was created with", c.Headers())
	}
	return nil
}

func rejectHandler(e *Env, s k8shttpstream.Stream, _ <-chan struct{}) error {
	if s.Headers().Get("X-Reject") != "" {
		return errors.New("rejected by test handler")
	}
	e.Accepted <- s
	return nil
}

func runHandlerErrorRejects(e *Env) error {
	start := time.Now()
	done := make(chan error, 1)
	go func() {
		s, err := e.Client.CreateStream(http.Header{"X-Reject": {"1"}})
		if err == nil {
			s.Reset()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			return errors.New("CreateStream succeeded although the handler returned an error")
		}
	case <-time.After(5 * time.Second):
		return errors.New("CreateStream did not fail within 5 s of the handler's rejection")
	}
	_ = start
	// The connection is still usable.
	c, _, err := e.Open("after-reject")
	if err != nil {
		return fmt.Errorf("connection unusable after a rejection: %w", err)
	}
	c.Reset()
	return nil
}

func replySentHandler(e *Env, s k8shttpstream.Stream, replySent <-chan struct{}) error {
	select {
	case <-replySent:
		e.Set("closedEarly", true)
	default:
	}
	go func() {
		select {
		case <-replySent:
			e.Set("replySent", time.Now())
		case <-e.Done:
		}
	}()
	e.Accepted <- s
	return nil
}

func runReplySentAfterReply(e *Env) error {
	c, _, err := e.Open("reply")
	if err != nil {
		return err
	}
	defer c.Reset()
	if e.Get("closedEarly") != nil {
		return errors.New("replySent was closed while the handler was still running")
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if e.Get("replySent") != nil {
			return nil
		}
		time.Sleep(5 * time.Millisecond)
	}
	return errors.New("replySent not closed within 5 s of the accepted CreateStream")
}

// readAllTimeout reads r to its end (any error), bounded.
func readAllTimeout(r io.Reader, d time.Duration) ([]byte, error) {
	type res struct {
		b   []byte
		err error
	}
	ch := make(chan res, 1)
	go func() {
		var buf bytes.Buffer
		_, err := io.Copy(&buf, r)
		if err == nil {
			err = io.EOF
		}
		ch <- res{buf.Bytes(), err}
	}()
	select {
	case r := <-ch:
		return r.b, r.err
	case <-time.After(d):
		return nil, fmt.Errorf("read did not end within %v", d)
	}
}

func runCloseIsHalfClose(e *Env) error {
	c, s, err := e.Open("half")
	if err != nil {
		return err
	}
	defer c.Reset()
	if _, err := c.Write([]byte("hello")); err != nil {
		return err
	}
	if err := c.Close(); err != nil {
		return fmt.Errorf("client Close: %w", err)
	}
	got, err := readAllTimeout(s, 5*time.Second)
	if !errors.Is(err, io.EOF) || string(got) != "hello" {
		return fmt.Errorf("server read %q, %v; want \"hello\" then EOF", got, err)
	}
	// The peer may still write back after our half-close.
	if _, err := s.Write([]byte("world")); err != nil {
		return fmt.Errorf("server write after client half-close: %w", err)
	}
	if err := s.Close(); err != nil {
		return fmt.Errorf("server Close: %w", err)
	}
	got, err = readAllTimeout(c, 5*time.Second)
	if !errors.Is(err, io.EOF) || string(got) != "world" {
		return fmt.Errorf("client read %q, %v after its own half-close; want \"world\" then EOF", got, err)
	}
	return nil
}

func runResetSeenByPeer(e *Env) error {
	c, s, err := e.Open("reset")
	if err != nil {
		return err
	}
	if err := c.Reset(); err != nil {
		return fmt.Errorf("Reset: %w", err)
	}
	if _, err := readAllTimeout(s, 5*time.Second); !isEndOfStream(err) {
		return fmt.Errorf("peer Read after Reset: %v", err)
	}
	// Reset ends both directions: the peer's writes fail (bounded: a write
	// may still be accepted before the RST arrives).
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := s.Write([]byte("x")); err != nil {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return errors.New("peer Write still succeeds 5 s after the stream was reset")
}

// isEndOfStream: the read ended (EOF or any error) rather than timing out.
func isEndOfStream(err error) bool {
	return err != nil && !bytes.Contains([]byte(err.Error()), []byte("did not end within"))
}

func waitClosed(ch <-chan bool, d time.Duration) bool {
	select {
	case <-ch:
		return true
	case <-time.After(d):
		return false
	}
}

func runConnectionCloseResetsAll(e *Env) error {
	var cs, ss []k8shttpstream.Stream
	for i := 0; i < 3; i++ {
		c, s, err := e.Open(fmt.Sprint("s", i))
		if err != nil {
			return err
		}
		cs, ss = append(cs, c), append(ss, s)
	}
	if err := e.Client.Close(); err != nil {
		return fmt.Errorf("Close: %w", err)
	}
	for i, s := range ss {
		if _, err := readAllTimeout(s, 5*time.Second); !isEndOfStream(err) {
			return fmt.Errorf("server stream %d: %v", i, err)
		}
	}
	if !waitClosed(e.Client.CloseChan(), 5*time.Second) {
		return errors.New("client CloseChan not closed within 5 s of Close")
	}
	if !waitClosed(e.Server.CloseChan(), 5*time.Second) {
		return errors.New("server CloseChan not closed within 5 s of the peer's Close")
	}
	for i, c := range cs {
		if _, err := c.Write([]byte("x")); err == nil {
			return fmt.Errorf("client stream %d: Write after Connection.Close succeeded", i)
		}
	}
	return nil
}

func runCreateStreamAfterConnClosed(e *Env) error {
	_ = e.Server.Close()
	if !waitClosed(e.Client.CloseChan(), 5*time.Second) {
		return errors.New("client CloseChan not closed within 5 s of the server's Close")
	}
	done := make(chan error, 1)
	go func() {
		s, err := e.Client.CreateStream(http.Header{})
		if err == nil {
			s.Reset()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			return errors.New("CreateStream on a dead connection succeeded")
		}
		return nil
	case <-time.After(3 * time.Second):
		return errors.New("CreateStream on a dead connection did not fail within 3 s")
	}
}

func blockingHandler(e *Env, s k8shttpstream.Stream, _ <-chan struct{}) error {
	e.Accepted <- s
	<-e.Done
	return errors.New("check over")
}

func runPendingCreateStream(e *Env) error {
	done := make(chan error, 1)
	go func() {
		s, err := e.Client.CreateStream(http.Header{})
		if err == nil {
			s.Reset()
		}
		done <- err
	}()
	if _, err := e.AcceptOne(5 * time.Second); err != nil {
		return err
	}
	// The server is inside its handler; the client is waiting for the reply.
	// Now the connection dies.
	_ = e.Client.Close()
	select {
	case err := <-done:
		if err == nil {
			return errors.New("pending CreateStream succeeded on a closed connection")
		}
		return nil
	case <-time.After(3 * time.Second):
		return errors.New("pending CreateStream still blocked 3 s after the connection was closed")
	}
}

func runIdleTimeout(e *Env) error {
	c, s, err := e.Open("idle")
	if err != nil {
		return err
	}
	_ = c
	// Some traffic, then silence.
	if _, err := c.Write([]byte("x")); err != nil {
		return err
	}
	if _, err := io.ReadFull(s, make([]byte, 1)); err != nil {
		return err
	}
	e.Server.SetIdleTimeout(300 * time.Millisecond)
	if !waitClosed(e.Server.CloseChan(), 5*time.Second) {
		return errors.New("server connection not closed within 5 s of a 300 ms idle timeout")
	}
	if !waitClosed(e.Client.CloseChan(), 5*time.Second) {
		return errors.New("client CloseChan not closed after the server's idle close")
	}
	return nil
}

// wrapped is a Stream wrapper, as client-go passes them to RemoveStreams.
type wrapped struct{ k8shttpstream.Stream }

type fakeStream struct{ id uint32 }

func (f fakeStream) Read([]byte) (int, error)  { return 0, io.EOF }
func (f fakeStream) Write([]byte) (int, error) { return 0, io.ErrClosedPipe }
func (f fakeStream) Close() error              { return nil }
func (f fakeStream) Reset() error              { return nil }
func (f fakeStream) Headers() http.Header      { return http.Header{} }
func (f fakeStream) Identifier() uint32        { return f.id }

func runRemoveStreams(e *Env) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("RemoveStreams panicked: %v", p)
		}
	}()
	c1, s1, err := e.Open("r1")
	if err != nil {
		return err
	}
	c2, s2, err := e.Open("r2")
	if err != nil {
		return err
	}
	e.Client.RemoveStreams(wrapped{c1}, nil, fakeStream{id: 1<<31 - 1})
	e.Client.RemoveStreams()
	e.Server.RemoveStreams(s1, nil)
	// Removed streams keep working: RemoveStreams only forgets them.
	if _, err := c1.Write([]byte("ping")); err != nil {
		return fmt.Errorf("write on a removed stream: %w", err)
	}
	if _, err := io.ReadFull(s1, make([]byte, 4)); err != nil {
		return fmt.Errorf("read on a removed stream: %w", err)
	}
	if _, err := s2.Write([]byte("pong")); err != nil {
		return err
	}
	if _, err := io.ReadFull(c2, make([]byte, 4)); err != nil {
		return err
	}
	c1.Reset()
	c2.Reset()
	return nil
}

func runIdentifiers(e *Env) error {
	var last uint32
	for i := 0; i < 5; i++ {
		c, s, err := e.Open(fmt.Sprint("id", i))
		if err != nil {
			return err
		}
		id := c.Identifier()
		if id%2 != 1 {
			return fmt.Errorf("client stream id %d is not odd", id)
		}
		if id <= last {
			return fmt.Errorf("client stream ids not increasing: %d after %d", id, last)
		}
		if s.Identifier() != id {
			return fmt.Errorf("server sees id %d for client stream %d", s.Identifier(), id)
		}
		last = id
		c.Reset()
	}
	// Server-initiated streams get even ids.
	ss, err := e.Server.CreateStream(http.Header{"X-From": {"server"}})
	if err != nil {
		return fmt.Errorf("server CreateStream: %w", err)
	}
	defer ss.Reset()
	if ss.Identifier() == 0 || ss.Identifier()%2 != 0 {
		return fmt.Errorf("server stream id %d is not even", ss.Identifier())
	}
	return nil
}

func randBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

func runDataBeforeReset(e *Env) error {
	c, s, err := e.Open("tail")
	if err != nil {
		return err
	}
	defer c.Reset()
	payload := randBytes(64 << 10)
	if _, err := s.Write(payload); err != nil {
		return err
	}
	if err := s.Reset(); err != nil {
		return err
	}
	got, err := readAllTimeout(c, 5*time.Second)
	if !bytes.Equal(got, payload) {
		return fmt.Errorf("read %d of %d bytes written before the peer's Reset (end: %v)", len(got), len(payload), err)
	}
	if !errors.Is(err, io.EOF) {
		return fmt.Errorf("after the data, Read returned %v, want io.EOF", err)
	}
	return nil
}

func runDataBeforeConnClose(e *Env) error {
	c, s, err := e.Open("exit")
	if err != nil {
		return err
	}
	defer c.Reset()
	payload := randBytes(64 << 10)
	if _, err := s.Write(payload); err != nil {
		return err
	}
	status := []byte(`{"status":"Failure","reason":"NonZeroExitCode"}`)
	c2, s2, err := e.Open("status")
	if err != nil {
		return err
	}
	defer c2.Reset()
	if _, err := s2.Write(status); err != nil {
		return err
	}
	// The kubelet's exec: write the status, then close the connection.
	_ = e.Server.Close()
	got, err := readAllTimeout(c, 5*time.Second)
	if !bytes.Equal(got, payload) {
		return fmt.Errorf("stdout-like stream: read %d of %d bytes written before the connection Close (end: %v)", len(got), len(payload), err)
	}
	got, _ = readAllTimeout(c2, 5*time.Second)
	if !bytes.Equal(got, status) {
		return fmt.Errorf("status-like stream: read %q, want %q", got, status)
	}
	return nil
}

func runZeroLengthWrite(e *Env) error {
	c, s, err := e.Open("zero")
	if err != nil {
		return err
	}
	defer c.Reset()
	if n, err := c.Write(nil); n != 0 || err != nil {
		return fmt.Errorf("Write(nil) = %d, %v", n, err)
	}
	if _, err := c.Write([]byte("z")); err != nil {
		return err
	}
	buf := make([]byte, 8)
	n, err := s.Read(buf)
	if n != 1 || err != nil || buf[0] != 'z' {
		return fmt.Errorf("first Read after a zero-length write = %d %q %v, want 1 \"z\"", n, buf[:n], err)
	}
	return nil
}

func runLargeWrite(e *Env) error {
	c, s, err := e.Open("large")
	if err != nil {
		return err
	}
	defer c.Reset()
	payload := randBytes(32 << 20)
	want := sha256.Sum256(payload)
	werr := make(chan error, 1)
	go func() {
		_, err := c.Write(payload)
		if err == nil {
			err = c.Close()
		}
		werr <- err
	}()
	type res struct {
		n   int64
		sum []byte
		err error
	}
	rc := make(chan res, 1)
	go func() {
		h := sha256.New()
		n, err := io.Copy(h, s)
		rc <- res{n, h.Sum(nil), err}
	}()
	if err := <-werr; err != nil {
		return fmt.Errorf("one 32 MiB Write: %w", err)
	}
	r := <-rc
	if r.err != nil || r.n != int64(len(payload)) || !bytes.Equal(r.sum, want[:]) {
		return fmt.Errorf("received %d bytes (%v), sha256 match %v", r.n, r.err, bytes.Equal(r.sum, want[:]))
	}
	return nil
}

func runConcurrent(e *Env) error {
	const streams, size = 64, 1 << 20
	var wg sync.WaitGroup
	errs := make(chan error, streams*2)
	for i := 0; i < streams; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			name := fmt.Sprint("bulk", i)
			c, err := e.Client.CreateStream(http.Header{"X-Conformance": {name}})
			if err != nil {
				errs <- err
				return
			}
			defer c.Reset()
			payload := randBytes(size)
			want := sha256.Sum256(payload)
			go func() {
				if _, err := c.Write(payload); err != nil {
					errs <- fmt.Errorf("%s write: %w", name, err)
				}
				_ = c.Close()
			}()
			h := sha256.New()
			n, err := io.Copy(h, c)
			if err != nil || n != size || !bytes.Equal(h.Sum(nil), want[:]) {
				errs <- fmt.Errorf("%s: echoed %d bytes (%v), sha256 match %v", name, n, err, bytes.Equal(h.Sum(nil), want[:]))
			}
		}(i)
	}
	// Server side: echo every stream.
	var swg sync.WaitGroup
	for i := 0; i < streams; i++ {
		s, err := e.AcceptOne(60 * time.Second)
		if err != nil {
			return err
		}
		swg.Add(1)
		go func() {
			defer swg.Done()
			if _, err := io.Copy(s, s); err != nil {
				errs <- fmt.Errorf("server echo: %w", err)
			}
			_ = s.Close()
		}()
	}
	wg.Wait()
	swg.Wait()
	close(errs)
	for err := range errs {
		return err
	}
	return nil
}

func runSlowReaderIsolation(e *Env) error {
	stalled, sstalled, err := e.Open("stalled")
	if err != nil {
		return err
	}
	defer stalled.Reset()
	busy, sbusy, err := e.Open("busy")
	if err != nil {
		return err
	}
	defer busy.Reset()
	// The server floods the stalled stream, which the client never reads.
	go func() {
		chunk := make([]byte, 32<<10)
		for {
			if _, err := sstalled.Write(chunk); err != nil {
				return
			}
		}
	}()
	// Meanwhile 16 MiB must move on the other stream.
	const total = 16 << 20
	go func() {
		chunk := make([]byte, 32<<10)
		for sent := 0; sent < total; sent += len(chunk) {
			if _, err := sbusy.Write(chunk); err != nil {
				return
			}
		}
		_ = sbusy.Close()
	}()
	// Progress, not speed, is the criterion (the machine may be slow and
	// loaded): the busy stream must never stall for stallLimit.
	const stallLimit = 5 * time.Second
	var got atomic.Int64
	type res struct {
		n   int64
		err error
	}
	ch := make(chan res, 1)
	go func() {
		buf := make([]byte, 32<<10)
		var n int64
		for {
			m, err := busy.Read(buf)
			n += int64(m)
			got.Store(n)
			if err != nil {
				if err == io.EOF {
					err = nil
				}
				ch <- res{n, err}
				return
			}
		}
	}()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	last, lastMove := int64(-1), time.Now()
	for {
		select {
		case r := <-ch:
			if r.err != nil || r.n != total {
				return fmt.Errorf("busy stream moved %d of %d bytes (%v)", r.n, total, r.err)
			}
			return nil
		case <-tick.C:
			if n := got.Load(); n != last {
				last, lastMove = n, time.Now()
			} else if time.Since(lastMove) > stallLimit {
				return fmt.Errorf("busy stream stalled for %v at %d of %d bytes behind a never-read stream (head-of-line blocking)", stallLimit, n, total)
			}
		}
	}
}

func runFlowControlBound(e *Env) error {
	c, s, err := e.Open("unread")
	if err != nil {
		return err
	}
	defer c.Reset()
	var written atomic.Int64
	go func() {
		chunk := make([]byte, 16<<10)
		for {
			n, err := s.Write(chunk)
			written.Add(int64(n))
			if err != nil {
				return
			}
		}
	}()
	// Wait for the writer to stall.
	const bound = 32 << 20
	var last int64 = -1
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		time.Sleep(500 * time.Millisecond)
		w := written.Load()
		if w > bound {
			return fmt.Errorf("sender wrote %d MiB into a never-read stream (bound %d MiB)", w>>20, bound>>20)
		}
		if w == last {
			return nil
		}
		last = w
	}
	return fmt.Errorf("sender never stalled on a never-read stream (%d MiB written in 10 s)", written.Load()>>20)
}
