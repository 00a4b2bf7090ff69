package gateway

import (
	"context"
	"net/http"

	"github.com/wsmux/wsmux/controller"
)

// authenticatedKey carries a caller whose credential was checked before
// the request reached the gateway's handler (ServeAs). Only this package
// can set it: no header or request field can.
type authenticatedKey struct{}

// ServeAs serves r as the caller u, authenticated elsewhere: a one-time
// ticket, or the controller that handed the connection off. Everything
// after authentication is as for any other request: impersonation of u,
// the policy file, per-caller limits (u.ID names the caller), metrics and
// the audit line.
func (g *Gateway) ServeAs(w http.ResponseWriter, r *http.Request, u controller.User) {
	g.serveStreaming(w, r.WithContext(context.WithValue(r.Context(), authenticatedKey{}, u)))
}

// identify returns the caller ServeAs gave, or authenticates r.
func (g *Gateway) identify(r *http.Request) (controller.User, error) {
	if u, ok := r.Context().Value(authenticatedKey{}).(controller.User); ok {
		return u, nil
	}
	return g.cfg.Auth.Authenticate(r)
}
