// Package tunnel forwards plain TCP connections over one wsmux session:
// the client (Forwarder) opens one stream per accepted local connection,
// naming its target in the stream's headers; the server (Server) dials the
// target if it is allow-listed and splices the two, half-closes included.
//
// It imports mux, frame, auth, ops and internal/resumedial; it must not import
// the gateway, the adapters, testing or the test helpers.
package tunnel

import (
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/wsmux/wsmux/frame"
	"github.com/wsmux/wsmux/mux"
)

// TargetHeader is the stream header naming the host:port to dial.
const TargetHeader = "Target"

// DefaultPath is the server's upgrade path.
const DefaultPath = "/tunnel"

// Application error codes of refused or failed tunnel streams.
const (
	// CodeBadRequest: the stream named no valid target.
	CodeBadRequest frame.ErrorCode = frame.FirstApplicationCode + iota
	// CodeNotAllowed: the target is not on the server's allow list.
	CodeNotAllowed
	// CodeDialFailed: the server could not connect to the target.
	CodeDialFailed
	// CodeConnReset: a tunnelled connection ended abnormally.
	CodeConnReset
)

// CodeName names an application code of this package.
func CodeName(c frame.ErrorCode) string {
	switch c {
	case CodeBadRequest:
		return "BAD_REQUEST"
	case CodeNotAllowed:
		return "TARGET_NOT_ALLOWED"
	case CodeDialFailed:
		return "TARGET_DIAL_FAILED"
	case CodeConnReset:
		return "CONNECTION_RESET"
	}
	return c.String()
}

// CanonicalTarget validates a host:port and returns it with the host in
// lower case (IPv6 literals keep their brackets).
func CanonicalTarget(s string) (string, error) {
	host, port, err := net.SplitHostPort(strings.TrimSpace(s))
	if err != nil {
		return "", err
	}
	if host == "" || port == "" {
		return "", errors.New("target " + s + ": want HOST:PORT")
	}
	if _, err := net.LookupPort("tcp", port); err != nil {
		return "", errors.New("target " + s + ": bad port")
	}
	return net.JoinHostPort(strings.ToLower(host), port), nil
}

// splice copies between a stream and a TCP connection until both
// directions ended. An EOF on either side half-closes the other (FIN or
// CloseWrite); an error resets the stream and aborts the TCP connection.
// It returns the bytes copied each way.
func splice(st *mux.Stream, c net.Conn, waitAccepted bool) (toConn, toStream int64) {
	var wg sync.WaitGroup
	var sent atomic.Bool // our direction ended with a FIN
	wg.Add(1)
	go func() { // stream -> connection
		defer wg.Done()
		n, err := io.Copy(c, st)
		toConn = n
		if err == nil {
			if !sent.Load() && ended(st.Session()) {
				// EOF because the peer closed the whole session under a
				// stream we were still sending on (mux reads a peer's Close
				// as EOF, and may lose a reset sent just before it): the
				// transfer was cut, not finished. A drain ends a session
				// only after its streams ended both ways.
				_ = st.Reset(CodeConnReset)
				abort(c)
				return
			}
			closeWrite(c)
			return
		}
		// A reset stream or a dead session: abort the TCP side. A failed
		// write to the TCP side: reset the stream, so the peer stops
		// sending instead of waiting for credit that never comes.
		_ = st.Reset(CodeConnReset)
		abort(c)
	}()
	if waitAccepted {
		// A peer-opened stream: data only after our acceptance went out.
		select {
		case <-st.Accepted():
		case <-st.Session().CloseChan():
		}
	}
	n, err := io.Copy(st, c)
	toStream = n
	if err == nil {
		sent.Store(true)
		_ = st.CloseWrite()
	} else {
		_ = st.Reset(CodeConnReset)
		abort(c)
	}
	wg.Wait()
	_ = c.Close()
	return toConn, toStream
}

// ended reports whether s has ended.
func ended(s *mux.Session) bool {
	select {
	case <-s.CloseChan():
		return true
	default:
		return false
	}
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	_ = c.Close()
}

// abort closes c so its peer sees a reset rather than a clean end.
func abort(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}
