// Package handoff is the gateway's end of the socket handoff
// (docs/controller.md): a Unix SOCK_SEQPACKET listener
// (--handoff-socket) on which a controller that has authenticated and
// authorized a client passes the client's connected socket (SCM_RIGHTS)
// with one JSON message (controller.HandoffMessage): the caller, the
// target and the bytes it already read. The gateway replays those bytes
// in front of the socket, serves the request (the upgrade, then the
// session) as the caller, for the target given, through the gateway's
// ServeAs. Only peers whose uid (SO_PEERCRED) is allowed may hand off;
// anything malformed is closed, logged and counted. It imports the
// controller package (the message) and auth, ops; never the gateway: its
// ServeAs is handed in.
package handoff

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wsmux/wsmux/controller"
	"github.com/wsmux/wsmux/gateway/ops"
)

// Results of a handoff, the label of wsmux_handoffs_total and the reason
// of a refusal the controller reads in its reply.
const (
	ResultAccepted         = "accepted"
	ResultPeerNotAllowed   = "peer_not_allowed"           // SO_PEERCRED uid not in the allow list
	ResultTruncated        = "truncated"                  // message or control data cut (too long, too many descriptors)
	ResultNoDescriptor     = "no_descriptor"              // a message without a socket
	ResultExtraDescriptors = "extra_descriptors"          // more than one socket
	ResultBadMessage       = controller.HandoffBadMessage // not the JSON of a version 1 message, or an invalid one
	ResultBadDescriptor    = "bad_descriptor"             // not a connected stream socket
	ResultTLS              = controller.HandoffTLS        // the bytes already read are a TLS handshake
	ResultShuttingDown     = "shutting_down"
	ResultTooManyConns     = "too_many_connections" // the gateway holds MaxConns handed-off connections
)

// Config configures Listen.
type Config struct {
	// Path is the socket's path. A stale socket file there (nothing
	// listening) is replaced; anything else is an error.
	Path string
	// AllowUIDs are the uids that may hand off; empty: the gateway's own.
	AllowUIDs []int
	// ServeAs serves a handed-off request as its caller (the gateway's).
	ServeAs func(http.ResponseWriter, *http.Request, controller.User)
	// Stopping, when set and true, refuses handoffs (shutdown).
	Stopping func() bool
	// Metrics receives wsmux_handoffs_total (the gateway's).
	Metrics *ops.Metrics
	Logger  *slog.Logger
	// ReadHeaderTimeout bounds reading the rest of the request head from
	// a handed-off socket (default 10 s).
	ReadHeaderTimeout time.Duration
	// MaxConns bounds the handed-off connections open at once (being
	// served, or the sessions they became); beyond it a handoff is refused
	// (too_many_connections) and its socket closed. 0:
	// ops.DefaultMaxConns; negative: no limit.
	MaxConns int
}

// Server receives handoffs.
type Server struct {
	cfg     Config
	ln      *net.UnixListener
	log     *slog.Logger
	results *prometheus.CounterVec
	allow   map[int]bool
	conns   *ops.ConnGate // handed-off connections (MaxConns)

	mu      sync.Mutex
	closed  bool
	ctrl    map[*net.UnixConn]struct{}
	servers map[*http.Server]struct{}
	active  int           // control connections and handed-off connections being served
	idle    chan struct{} // closed when active is 0
}

var errClosed = errors.New("handoff: server closed")

func (s *Server) enter() {
	s.mu.Lock()
	if s.active == 0 {
		s.idle = make(chan struct{})
	}
	s.active++
	s.mu.Unlock()
}

func (s *Server) leave() {
	s.mu.Lock()
	s.active--
	if s.active == 0 {
		close(s.idle)
	}
	s.mu.Unlock()
}

// idleCh returns a channel closed once nothing is being served.
func (s *Server) idleCh() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.active == 0 {
		c := make(chan struct{})
		close(c)
		return c
	}
	return s.idle
}

// Addr is the socket's path.
func (s *Server) Addr() string { return s.cfg.Path }

func refuse(reason, format string, a ...any) controller.HandoffReply {
	return controller.HandoffReply{V: controller.HandoffVersion, Reason: reason, Error: fmt.Sprintf(format, a...)}
}
