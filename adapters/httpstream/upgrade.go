package httpstream

import (
	"net/http"
	"time"

	"github.com/wsmux/wsmux/internal/wshandshake"
	"github.com/wsmux/wsmux/mux"
	apihttpstream "k8s.io/apimachinery/pkg/util/httpstream"
	k8shttpstream "k8s.io/streaming/pkg/httpstream"
	"k8s.io/streaming/pkg/runtime"
)

// responseUpgrader upgrades HTTP requests to wsmux connections.
type responseUpgrader struct {
	pingPeriod time.Duration
	cfg        *mux.Config
}

// NewResponseUpgrader returns an httpstream.ResponseUpgrader that accepts
// wsmux WebSocket upgrades (subprotocol wsmux.v1). Headers already set on
// the ResponseWriter, such as the X-Stream-Protocol-Version that
// httpstream.Handshake chose, are sent in the 101 response. A request that
// is not a wsmux upgrade is answered with an HTTP error (400) and
// UpgradeResponse returns nil, as the SPDY upgrader does.
func NewResponseUpgrader() apihttpstream.ResponseUpgrader {
	return NewResponseUpgraderWithPings(0)
}

// NewResponseUpgraderWithPings is NewResponseUpgrader with keepalive PINGs
// after pingPeriod without sending.
func NewResponseUpgraderWithPings(pingPeriod time.Duration) apihttpstream.ResponseUpgrader {
	return compatUpgrader{responseUpgrader{pingPeriod: pingPeriod}}
}

// NewResponseUpgraderForStreaming is NewResponseUpgrader with
// k8s.io/streaming types.
func NewResponseUpgraderForStreaming() k8shttpstream.ResponseUpgrader {
	return NewResponseUpgraderWithPingsForStreaming(0)
}

// NewResponseUpgraderWithPingsForStreaming is NewResponseUpgraderWithPings
// with k8s.io/streaming types.
func NewResponseUpgraderWithPingsForStreaming(pingPeriod time.Duration) k8shttpstream.ResponseUpgrader {
	return responseUpgrader{pingPeriod: pingPeriod}
}

// NewResponseUpgraderWithConfig returns a k8s.io/streaming ResponseUpgrader
// whose sessions use cfg (its Handler is replaced by the NewStreamHandler).
//
// With cfg.Resume and cfg.ResumeRegistry set, sessions are resumable
// (docs/spec/wsmux-resume-v1.md): the upgrade is mux.Upgrade's (GET only),
// and a request that resumes a suspended session is served by the registry
// (101 and the session goes on, or 403/404/409/429/503) with
// UpgradeResponse returning nil: the handler has nothing more to do.
func NewResponseUpgraderWithConfig(cfg *mux.Config) k8shttpstream.ResponseUpgrader {
	return responseUpgrader{cfg: cfg}
}

// IsWsmuxRequest reports whether req is a WebSocket upgrade offering wsmux.v1
// (for dispatching it away from handlers that treat every WebSocket as
// Kubernetes' channel protocol).
func IsWsmuxRequest(req *http.Request) bool { return wshandshake.IsRequest(req) }

func (u responseUpgrader) upgrade(w http.ResponseWriter, req *http.Request, h k8shttpstream.NewStreamHandler) *connection {
	if u.cfg != nil && u.cfg.Resume && u.cfg.ResumeRegistry != nil {
		// mux's own upgrade registers the session for resumption, and
		// serves a resume request (no new connection: nil).
		c, scfg := prepareConnection(u.cfg, u.pingPeriod, h)
		sess, err := mux.Upgrade(w, req, scfg)
		if err != nil {
			return nil
		}
		c.start(sess)
		return c
	}
	conn, br, err := wshandshake.UpgradeAcceptingPOST(w, req, w.Header())
	if err != nil {
		return nil
	}
	if br.Buffered() == 0 {
		br = nil
	}
	c, err := newConnection(conn, br, false, u.cfg, u.pingPeriod, h)
	if err != nil {
		runtime.HandleErrorWithContext(req.Context(), err, "Unable to upgrade: error creating wsmux server connection")
		return nil
	}
	return c
}

// UpgradeResponse upgrades the request; newStreamHandler runs (off the read
// loop) for every stream the client opens.
func (u responseUpgrader) UpgradeResponse(w http.ResponseWriter, req *http.Request, newStreamHandler k8shttpstream.NewStreamHandler) k8shttpstream.Connection {
	if c := u.upgrade(w, req, newStreamHandler); c != nil {
		return c
	}
	return nil
}

type compatUpgrader struct{ u responseUpgrader }

func (a compatUpgrader) UpgradeResponse(w http.ResponseWriter, req *http.Request, newStreamHandler apihttpstream.NewStreamHandler) apihttpstream.Connection {
	if c := a.u.upgrade(w, req, compatHandler(newStreamHandler)); c != nil {
		return compat{c}
	}
	return nil
}
