//go:build linux

package handoff

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wsmux/wsmux/controller"
	"github.com/wsmux/wsmux/gateway/ops"
)

// maxFDs is how many descriptors a message may carry before the control
// data is truncated; one is accepted.
const maxFDs = 16

// Listen listens on cfg.Path. The socket file gets mode 0666: any local
// user may connect, and SO_PEERCRED refuses those not allowed before
// anything is read.
func Listen(cfg Config) (*Server, error) {
	if cfg.ServeAs == nil || cfg.Metrics == nil {
		return nil, errors.New("handoff: ServeAs and Metrics are required")
	}
	if cfg.ReadHeaderTimeout <= 0 {
		cfg.ReadHeaderTimeout = 10 * time.Second
	}
	s := &Server{cfg: cfg, log: cfg.Logger, allow: map[int]bool{}, ctrl: map[*net.UnixConn]struct{}{}, servers: map[*http.Server]struct{}{}}
	if s.log == nil {
		s.log = slog.Default()
	}
	if len(cfg.AllowUIDs) == 0 {
		s.allow[os.Getuid()] = true
	}
	for _, u := range cfg.AllowUIDs {
		s.allow[u] = true
	}
	s.results = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "wsmux_handoffs_total", Help: "Sockets handed off by controllers (--handoff-socket), by result (accepted or why refused).",
	}, []string{"result"})
	if err := cfg.Metrics.Registry.Register(s.results); err != nil {
		return nil, err
	}
	for _, r := range []string{ResultAccepted, ResultPeerNotAllowed, ResultTruncated, ResultNoDescriptor, ResultExtraDescriptors,
		ResultBadMessage, ResultBadDescriptor, ResultTLS, ResultShuttingDown, ResultTooManyConns} {
		s.results.WithLabelValues(r)
	}
	max := ops.ConnLimits{MaxConns: cfg.MaxConns}.WithDefaults().MaxConns
	conns, err := ops.NewConnGate("handoff", max, nil, cfg.Metrics, s.log)
	if err != nil {
		return nil, err
	}
	s.conns = conns
	if err := removeStale(cfg.Path); err != nil {
		return nil, err
	}
	ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: cfg.Path, Net: "unixpacket"})
	if err != nil {
		return nil, fmt.Errorf("handoff socket %s: %w", cfg.Path, err)
	}
	if err := os.Chmod(cfg.Path, 0o666); err != nil {
		ln.Close()
		return nil, err
	}
	s.ln = ln
	return s, nil
}

// removeStale removes a socket file nothing listens on.
func removeStale(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.Mode()&os.ModeSocket == 0 {
		return fmt.Errorf("handoff socket %s: the path exists and is not a socket: pick another path", path)
	}
	if c, err := net.Dial("unixpacket", path); err == nil {
		c.Close()
		return fmt.Errorf("handoff socket %s: another process listens on it: stop it or pick another path", path)
	}
	return os.Remove(path)
}

// Serve accepts controllers' connections until Close; it returns nil then.
func (s *Server) Serve() error {
	for {
		c, err := s.ln.AcceptUnix()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed {
				return nil
			}
			if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) || errors.Is(err, syscall.ENOBUFS) || errors.Is(err, syscall.ENOMEM) {
				// Out of descriptors or memory: wait for some to be freed, as
				// net/http's server does, rather than stop taking handoffs.
				s.log.Error("handoff: accepting a controller connection failed; retrying", "error", err)
				time.Sleep(100 * time.Millisecond)
				continue
			}
			return err
		}
		uid, pid, err := peerCred(c)
		if err != nil || !s.allow[uid] {
			s.results.WithLabelValues(ResultPeerNotAllowed).Inc()
			s.log.Warn("handoff: refused a controller connection: its uid is not allowed (--handoff-allow-uid); closed before reading anything",
				"peer_uid", uid, "peer_pid", pid, "error", err)
			c.Close()
			continue
		}
		if !s.track(c) {
			c.Close()
			return nil
		}
		go s.control(c, uid, pid)
	}
}

func peerCred(c *net.UnixConn) (int, int32, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return -1, 0, err
	}
	var cred *syscall.Ucred
	var cerr error
	if err := rc.Control(func(fd uintptr) {
		cred, cerr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return -1, 0, err
	}
	if cerr != nil {
		return -1, 0, cerr
	}
	return int(cred.Uid), cred.Pid, nil
}

// track registers a control connection (false once closed).
func (s *Server) track(c *net.UnixConn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.ctrl[c] = struct{}{}
	if s.active == 0 {
		s.idle = make(chan struct{})
	}
	s.active++
	return true
}

// control reads one handoff per message until the controller closes the
// connection, answering each.
func (s *Server) control(c *net.UnixConn, uid int, pid int32) {
	defer func() {
		c.Close()
		s.mu.Lock()
		delete(s.ctrl, c)
		s.mu.Unlock()
		s.leave()
	}()
	buf := make([]byte, controller.MaxHandoffMessage+1)
	oob := make([]byte, syscall.CmsgSpace(4*maxFDs))
	log := s.log.With("peer_uid", uid, "peer_pid", pid)
	for {
		n, oobn, flags, _, err := c.ReadMsgUnix(buf, oob)
		if err != nil || n == 0 && oobn == 0 {
			return // the controller closed it (or Close did)
		}
		reply := s.receive(log, buf[:n], oob[:oobn], flags)
		js, _ := json.Marshal(reply)
		_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write(js); err != nil {
			log.Warn("handoff: could not answer the controller; closing its connection", "error", err)
			return
		}
	}
}

// receive handles one message: on success the socket is being served;
// otherwise every descriptor received is closed. Either way it is
// logged and counted.
func (s *Server) receive(log *slog.Logger, msg, oob []byte, flags int) controller.HandoffReply {
	fds, cerr := rights(oob)
	reply := s.check(msg, fds, cerr, flags)
	var m controller.HandoffMessage
	if reply.Reason == "" {
		m, _, _ = controller.ParseHandoffMessage(msg) // checked
		reply = s.start(fds[0], m)                    // it owns fds[0] from here
		fds = fds[1:]
	}
	for _, fd := range fds {
		syscall.Close(fd)
	}
	if reply.Reason != "" {
		s.results.WithLabelValues(reply.Reason).Inc()
		log.Warn("handoff: refused: "+reply.Error+"; everything received was closed", "reason", reply.Reason,
			"descriptors", len(fds), "bytes", len(msg))
		return reply
	}
	s.results.WithLabelValues(ResultAccepted).Inc()
	log.Info("handoff: accepted", "user", m.User.Name, "namespace", m.Target.Namespace, "pod", m.Target.Pod,
		"subresource", m.Target.Subresource, "bytes_already_read", len(m.Data), "remote", m.RemoteAddr)
	return controller.HandoffReply{V: controller.HandoffVersion, OK: true}
}

// rights returns the descriptors of the control data's SCM_RIGHTS
// messages (all of them, to close them all on any error).
func rights(oob []byte) ([]int, error) {
	cms, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, fmt.Errorf("control data: %w", err)
	}
	var fds []int
	var ferr error
	for _, cm := range cms {
		if cm.Header.Level != syscall.SOL_SOCKET || cm.Header.Type != syscall.SCM_RIGHTS {
			continue
		}
		f, err := syscall.ParseUnixRights(&cm)
		if err != nil {
			ferr = err
			continue
		}
		fds = append(fds, f...)
	}
	return fds, ferr
}

// check validates a message and its descriptors.
func (s *Server) check(msg []byte, fds []int, cerr error, flags int) controller.HandoffReply {
	switch {
	case flags&syscall.MSG_CTRUNC != 0:
		return refuse(ResultTruncated, "control data truncated (%d descriptors arrived): send exactly one descriptor", len(fds))
	case flags&syscall.MSG_TRUNC != 0:
		return refuse(ResultTruncated, "message longer than %d bytes", controller.MaxHandoffMessage)
	case cerr != nil:
		return refuse(ResultTruncated, "%v", cerr)
	case len(fds) == 0:
		return refuse(ResultNoDescriptor, "no descriptor: send the client's socket with SCM_RIGHTS in the same message")
	case len(fds) > 1:
		return refuse(ResultExtraDescriptors, "%d descriptors: send exactly one, the client's socket", len(fds))
	}
	if _, reason, err := controller.ParseHandoffMessage(msg); err != nil {
		return refuse(reason, "%v", err)
	}
	typ, err := syscall.GetsockoptInt(fds[0], syscall.SOL_SOCKET, syscall.SO_TYPE)
	if err != nil || typ != syscall.SOCK_STREAM {
		return refuse(ResultBadDescriptor, "the descriptor is not a stream socket (type %d, %v)", typ, err)
	}
	if l, _ := syscall.GetsockoptInt(fds[0], syscall.SOL_SOCKET, syscall.SO_ACCEPTCONN); l != 0 {
		return refuse(ResultBadDescriptor, "the descriptor is a listening socket: send the client's connected socket")
	}
	if s.cfg.Stopping != nil && s.cfg.Stopping() {
		return refuse(ResultShuttingDown, "the gateway is shutting down")
	}
	return controller.HandoffReply{}
}

// start serves the socket fd as m's caller; fd is closed either way
// (serving uses a duplicate).
func (s *Server) start(fd int, m controller.HandoffMessage) controller.HandoffReply {
	f := os.NewFile(uintptr(fd), "handoff")
	conn, err := net.FileConn(f)
	f.Close()
	if err != nil {
		return refuse(ResultBadDescriptor, "%v", err)
	}
	remote := conn.RemoteAddr()
	if m.RemoteAddr != "" {
		remote = addr(m.RemoteAddr)
	} else if remote == nil {
		remote = addr("handoff") // an unnamed peer: net/http wants an address
	}
	release, ok := s.conns.Acquire()
	if !ok {
		conn.Close()
		return refuse(ResultTooManyConns, "the gateway holds its limit of handed-off connections (--max-connections): retry later")
	}
	pc := newPrefixConn(conn, m.Data, remote, release)
	u := controller.User{ID: "handoff:" + m.User.Name, Name: m.User.Name, UID: m.User.UID, Groups: m.User.Groups}
	var hijacked atomic.Bool
	srv := &http.Server{
		Handler:  s.handler(m.Target, u),
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		ConnState: func(_ net.Conn, st http.ConnState) {
			if st == http.StateHijacked {
				hijacked.Store(true)
			}
		},
	}
	ops.ConnLimits{ReadHeaderTimeout: s.cfg.ReadHeaderTimeout}.Apply(srv)
	srv.SetKeepAlivesEnabled(false) // one request: the upgrade
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		pc.Close()
		return refuse(ResultShuttingDown, "the gateway is shutting down")
	}
	s.servers[srv] = struct{}{}
	if s.active == 0 {
		s.idle = make(chan struct{})
	}
	s.active++
	s.mu.Unlock()
	go func() {
		_ = srv.Serve(newOneConnListener(pc))
		if !hijacked.Load() {
			pc.Close() // Close ran before Serve: the connection was never served
		}
		s.mu.Lock()
		delete(s.servers, srv)
		s.mu.Unlock()
		s.leave()
	}()
	return controller.HandoffReply{}
}

// handler rewrites the request to the target's path and query (the
// client's own request line is on the controller's URLs) and serves it as
// u. The client's credentials for the controller go no further.
func (s *Server) handler(t controller.Target, u controller.User) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.enter()
		defer s.leave()
		r.URL.Path = "/api/v1/namespaces/" + t.Namespace + "/pods/" + t.Pod + "/" + t.Subresource
		r.URL.RawPath = ""
		r.URL.RawQuery = t.Query(r.URL.Query()).Encode()
		r.RequestURI = r.URL.RequestURI()
		r.Form = nil
		r.Header.Del("Authorization")
		r.Header.Del("Cookie")
		r.Header.Del("Proxy-Authorization")
		s.cfg.ServeAs(w, r, u)
	})
}

// Close stops accepting, closes the controllers' connections and the
// handed-off connections not yet upgraded, and waits for what it serves
// to end (upgraded sessions are the gateway's: its shutdown drains them).
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	err := s.ln.Close()
	for c := range s.ctrl {
		c.Close()
	}
	for srv := range s.servers {
		srv.Close()
	}
	s.mu.Unlock()
	<-s.idleCh()
	return err
}

// WaitIdle waits until no controller connection and no handed-off
// connection is being served, or ctx ends.
func (s *Server) WaitIdle(ctx context.Context) error {
	select {
	case <-s.idleCh():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

type addr string

func (a addr) Network() string { return "tcp" }
func (a addr) String() string  { return string(a) }
