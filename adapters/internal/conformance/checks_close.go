package conformance

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	k8shttpstream "k8s.io/streaming/pkg/httpstream"
)

// Checks of how streams and connections end: Close is a half-close, Reset
// is seen by the peer, closing the connection resets every stream,
// CreateStream fails on a closed connection (also while pending), the idle
// timeout closes the connection, RemoveStreams only forgets streams, and
// data written before a Reset or the connection's Close is still delivered.

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
