package gateway

import (
	"errors"
	"net/http"

	"github.com/wsmux/wsmux/controller"
	"github.com/wsmux/wsmux/gateway/ops"
	"github.com/wsmux/wsmux/mux"
)

// serveResume hands a wsmux resume request (Config.ResumeTimeout) to the
// suspended downstream session its token names. That session's streams are
// still spliced to their upstream connection, which was kept: nothing is
// dialled, and no session slot is taken. The registry answers what it
// cannot resume: 404 with "Wsmux-Resume: unknown" (not held here: the
// client fails fast), 403 (another caller), 409, 429 or 503.
func (g *Gateway) serveResume(w http.ResponseWriter, r *http.Request, u controller.User, t controller.Target) {
	if g.fleet != nil && g.fleet.forwardResume(w, r) { // held by another replica (fleet_forward.go)
		return
	}
	_, err := mux.Upgrade(w, r, g.muxCfg)
	log := g.log.With("remote", r.RemoteAddr, "caller", u.ID, "user", u.Name, "namespace", t.Namespace, "pod", t.Pod,
		"subresource", t.Subresource)
	var he *mux.HandshakeError
	switch {
	case errors.Is(err, mux.ErrResumed):
		g.m.Resumes.WithLabelValues("resumed").Inc()
		log.Info("gateway: session resumed on a new connection")
	case errors.As(err, &he):
		g.m.Resumes.WithLabelValues(ops.ResumeOutcome(he.StatusCode)).Inc()
		log.Warn("gateway: resume refused", "status", he.StatusCode)
	default:
		g.m.Resumes.WithLabelValues("failed").Inc()
		log.Warn("gateway: resume failed", "error", err)
	}
}
