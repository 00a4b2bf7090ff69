//go:build unix

package controller

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"syscall"
	"time"
)

// Handoff passes client, a connected stream socket (*net.TCPConn,
// *net.UnixConn), to the gateway listening on socketPath (`wsmux gateway
// --handoff-socket PATH`), with m, and waits for the gateway's answer
// (bounded by ctx; 10 s without a deadline). A refusal is a
// *HandoffError. Either way the caller must then Close (never
// CloseWrite or shutdown) its own copy of client: on success the gateway
// holds the connection.
func Handoff(ctx context.Context, socketPath string, client syscall.Conn, m HandoffMessage) error {
	if m.V == 0 {
		m.V = HandoffVersion
	}
	if err := m.Target.Validate(); err != nil {
		return err
	}
	if m.User.Name == "" {
		return errors.New("controller: handoff without a user name")
	}
	js, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if len(js) > MaxHandoffMessage {
		return fmt.Errorf("controller: handoff message of %d bytes: at most %d (the request head and the bytes after it, in base64)", len(js), MaxHandoffMessage)
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "unixpacket", socketPath)
	if err != nil {
		return fmt.Errorf("controller: connecting to the gateway's handoff socket: %w", err)
	}
	uc := c.(*net.UnixConn)
	defer uc.Close()
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(10 * time.Second)
	}
	_ = uc.SetDeadline(deadline)
	rc, err := client.SyscallConn()
	if err != nil {
		return err
	}
	var werr error
	if err := rc.Control(func(fd uintptr) {
		_, _, werr = uc.WriteMsgUnix(js, syscall.UnixRights(int(fd)), nil)
	}); err != nil {
		return err
	}
	if errors.Is(werr, syscall.EPIPE) || errors.Is(werr, syscall.ECONNRESET) {
		return &HandoffError{Reason: HandoffClosed, Message: closedMessage}
	}
	if werr != nil {
		return fmt.Errorf("controller: sending the handoff: %w", werr)
	}
	buf := make([]byte, 4096)
	n, err := uc.Read(buf)
	if err != nil || n == 0 {
		if err == nil || errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) {
			// Closed without reading: the gateway did not take the socket.
			return &HandoffError{Reason: HandoffClosed, Message: closedMessage}
		}
		return &NoAnswerError{Err: err}
	}
	var r HandoffReply
	if err := json.Unmarshal(buf[:n], &r); err != nil {
		return fmt.Errorf("controller: the gateway's answer %q: %w", buf[:n], err)
	}
	if !r.OK {
		return &HandoffError{Reason: r.Reason, Message: r.Error}
	}
	return nil
}

const closedMessage = "the gateway closed the handoff connection without answering (is this uid allowed by --handoff-allow-uid?)"

// HandoffHTTP hands the connection of r, an upgrade request a net/http
// handler has authenticated and authorized, to the gateway: it hijacks
// it, rebuilds the request head (net/http has parsed it), adds the bytes
// net/http read past it, and calls Handoff. The connection is closed
// here either way; on a refusal the client gets a 502 first (not when
// the gateway did not answer: it may be serving the client).
func HandoffHTTP(w http.ResponseWriter, r *http.Request, socketPath string, u User, t Target) error {
	if r.TLS != nil {
		return ErrTLS
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		return errors.New("controller: the ResponseWriter cannot hijack (HTTP/2?): upgrades need HTTP/1.1")
	}
	conn, brw, err := hj.Hijack()
	if err != nil {
		return err
	}
	defer conn.Close()
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return fmt.Errorf("controller: a %T has no descriptor to hand off", conn)
	}
	var head bytes.Buffer
	fmt.Fprintf(&head, "%s %s HTTP/1.1\r\nHost: %s\r\n", r.Method, r.RequestURI, r.Host)
	_ = r.Header.Write(&head)
	head.WriteString("\r\n")
	if n := brw.Reader.Buffered(); n > 0 {
		rest, _ := brw.Reader.Peek(n)
		head.Write(rest)
	}
	err = Handoff(r.Context(), socketPath, sc, HandoffMessage{User: u, Target: t, Data: head.Bytes(), RemoteAddr: r.RemoteAddr})
	var na *NoAnswerError
	if err != nil && !errors.As(err, &na) {
		msg := err.Error() + "\n"
		fmt.Fprintf(conn, "HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(msg), msg)
	}
	return err
}
