package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/wsmux/wsmux/controller"
)

// preflightTimeout bounds the access review that precedes a WebSocket
// upgrade; past it the upgrade goes on and the cluster decides after it.
const preflightTimeout = 5 * time.Second

// preflight asks the cluster, as the caller, whether it may create the
// target's subresource, before the gateway answers a WebSocket upgrade
// that it translates (v5/v4 exec and attach, the port-forward tunnel).
//
// Those upgrades are accepted before anything is dialled upstream, so a
// refusal by the cluster's authorizer would reach kubectl only as an
// error inside the accepted stream ("Internal error occurred: unable to
// upgrade connection"). The apiserver refuses them before upgrading, with
// a 403 that kubectl prints as "Error from server (Forbidden)" once it has
// fallen back to SPDY, where the gateway's bridge dials first and passes
// the cluster's own refusal on. So the gateway answers 403 where the
// review says the caller may not: kubectl falls back, and its SPDY request
// gets the cluster's own answer. The review decides nothing on its own:
// when it fails or cannot be made (a cluster without the authorization
// API, a timeout) the upgrade goes on, and the cluster decides upstream as
// before.
//
// It returns the refusal's message, or "" to go on.
func (g *Gateway) preflight(ctx context.Context, u controller.User, t controller.Target) string {
	if g.review == nil || !g.cfg.Impersonate || u.Name == "" {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, preflightTimeout)
	defer cancel()
	body, _ := json.Marshal(map[string]any{
		"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
		"spec": map[string]any{"resourceAttributes": map[string]any{
			"namespace": t.Namespace, "verb": "create", "resource": "pods", "subresource": t.Subresource, "name": t.Pod,
		}},
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.clusterURL("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", ""), bytes.NewReader(body))
	if err != nil {
		return ""
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	setImpersonation(req.Header, u)
	resp, err := g.review.Do(req)
	if err != nil {
		g.log.Debug("gateway: access review before a WebSocket upgrade failed; the cluster decides after it", "error", err)
		return ""
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		return ""
	}
	var sar struct {
		Status struct {
			Allowed bool   `json:"allowed"`
			Reason  string `json:"reason"`
		} `json:"status"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&sar); err != nil || sar.Status.Allowed {
		return ""
	}
	// The apiserver's own sentence (k8s.io/apiserver's forbidden message).
	msg := fmt.Sprintf("pods %q is forbidden: User %q cannot create resource %q in API group \"\" in the namespace %q",
		t.Pod, u.Name, "pods/"+t.Subresource, t.Namespace)
	if sar.Status.Reason != "" {
		msg += ": " + sar.Status.Reason
	}
	return msg
}
