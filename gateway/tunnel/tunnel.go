// Package tunnel forwards plain TCP connections over one wsmux session:
// the client (Forwarder) opens one stream per accepted local connection,
// naming its target in the stream's headers; the server (Server) dials the
// target if it is allow-listed and splices the two, half-closes included.
//
// It imports mux, frame, auth and ops; it must not import
// the gateway, the adapters, testing or the test helpers.
package tunnel

import (
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wsmux/wsmux/frame"
	"github.com/wsmux/wsmux/mux"
)

// TargetHeader is the stream header naming the host:port to dial.
const TargetHeader = "Target"

// StopLinger bounds how long a stream whose peer sent STOP_SENDING keeps
// reading, and discarding, what the TCP side still sends after the peer's
// direction has ended: closing a connection with bytes unread resets it,
// which can destroy forwarded bytes the target has not read yet
// (docs/spec/wsmux-tunnel-v1.md, T5).
const StopLinger = 5 * time.Second

// stopLinger is StopLinger; tests shorten it.
var stopLinger = StopLinger

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

// CanonicalTarget validates a HOST:PORT (docs/spec/wsmux-tunnel-v1.md,
// T3) and returns its canonical form: spaces and tabs around it dropped,
// the host in lower case (IPv6 literals keep their brackets), the port a
// decimal number from 1 to 65535 without leading zeros. Service names are
// not ports: what a name means would depend on the server's
// /etc/services.
func CanonicalTarget(s string) (string, error) {
	host, port, err := net.SplitHostPort(strings.Trim(s, " \t"))
	if err != nil {
		return "", err
	}
	if host == "" || port == "" {
		return "", errors.New("target " + s + ": want HOST:PORT")
	}
	n := 0
	for i := 0; i < len(port); i++ {
		c := port[i]
		if c < '0' || c > '9' || n > 65535 {
			n = 0
			break
		}
		n = n*10 + int(c-'0')
	}
	if n < 1 || n > 65535 {
		return "", errors.New("target " + s + ": the port must be a number from 1 to 65535")
	}
	return net.JoinHostPort(strings.ToLower(host), strconv.Itoa(n)), nil
}

// splice copies between a stream and a TCP connection until both
// directions ended. An EOF on either side half-closes the other (FIN or
// CloseWrite); an error resets the stream and aborts the TCP connection.
// The peer's STOP_SENDING (mux answers it with FIN) ends only our sending:
// what the TCP side still sends is read and discarded, and the peer's
// direction goes on to its end, after which nothing is left for the
// connection to carry and it is closed. It returns the bytes copied each
// way.
func splice(st *mux.Stream, c net.Conn, waitAccepted bool) (toConn, toStream int64) {
	var wg sync.WaitGroup
	var sent atomic.Bool    // our direction ended with a FIN
	var stopped atomic.Bool // the peer sent STOP_SENDING: we discard
	var inDone atomic.Bool  // the peer's direction ended: its FIN went on to c
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
			inDone.Store(true)
			if stopped.Load() {
				// The discarding read below ends at the target's EOF, or at
				// the linger's end.
				_ = c.SetReadDeadline(time.Now().Add(stopLinger))
			}
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
	var se *mux.StreamError
	switch {
	case err == nil:
		sent.Store(true)
		_ = st.CloseWrite()
	case errors.As(err, &se) && se.Stop:
		// STOP_SENDING (spec 7.7): not a reset. The stream's FIN went out;
		// the TCP side may still talk until it ends or the peer's
		// direction does.
		sent.Store(true)
		stopped.Store(true)
		if inDone.Load() {
			_ = c.SetReadDeadline(time.Now().Add(stopLinger))
		}
		// Closing c with bytes unread would reset it, and a reset can
		// destroy what the target has not read yet of the peer's
		// direction: read on until the target ends, or the linger does.
		_, _ = io.Copy(io.Discard, c)
	default:
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
