package ticket

import (
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wsmux/wsmux/controller"
	"github.com/wsmux/wsmux/gateway/auth"
	"github.com/wsmux/wsmux/gateway/ops"
)

// ReasonFull labels tickets refused because too many are outstanding (503).
const ReasonFull = "ticket_cache_full"

// ReasonUnavailable labels tickets refused because the fleet's shared
// state did not answer (503).
const ReasonUnavailable = "ticket_store_unavailable"

// Handler finds a ticket in a request (an "Authorization: Bearer
// wsmuxt1..." header, a "ticket" query parameter, or the bearer
// subprotocol browsers use), verifies it for exactly the request's
// target, and serves the request as the ticket's caller; requests
// without a ticket go to Next. A refused ticket gets 401 (503 when
// too many are outstanding), a log line and a count in
// wsmux_auth_failures_total{reason="ticket_..."}; a request with a
// ticket and another credential, or with any credential twice, gets 400
// (wsmux_bad_requests_total{reason="ambiguous_credentials"}).
type Handler struct {
	v        *Verifier
	next     http.Handler
	serveAs  func(http.ResponseWriter, *http.Request, controller.User)
	m        *ops.Metrics
	accepted prometheus.Counter
	log      *slog.Logger
}

// Config configures NewHandler.
type Config struct {
	Verifier *Verifier
	// Next serves the requests that carry no ticket.
	Next http.Handler
	// ServeAs serves a request as the ticket's caller (the gateway's).
	ServeAs func(http.ResponseWriter, *http.Request, controller.User)
	// Metrics receives the counts (the gateway's).
	Metrics *ops.Metrics
	Logger  *slog.Logger
}

// NewHandler returns the ticket handler; it registers
// wsmux_tickets_accepted_total on cfg.Metrics.Registry.
func NewHandler(cfg Config) (*Handler, error) {
	if cfg.Verifier == nil || cfg.Next == nil || cfg.ServeAs == nil || cfg.Metrics == nil {
		return nil, errors.New("ticket: handler needs a verifier, a next handler, ServeAs and metrics")
	}
	h := &Handler{v: cfg.Verifier, next: cfg.Next, serveAs: cfg.ServeAs, m: cfg.Metrics, log: cfg.Logger}
	if h.log == nil {
		h.log = slog.Default()
	}
	h.accepted = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "wsmux_tickets_accepted_total", Help: "One-time tickets accepted (each opened one session).",
	})
	if err := cfg.Metrics.Registry.Register(h.accepted); err != nil {
		return nil, err
	}
	for _, r := range []string{controller.ReasonMalformed, controller.ReasonBadMAC, controller.ReasonExpired,
		controller.ReasonLifetime, controller.ReasonWrongTarget, controller.ReasonReplayed, ReasonFull, ReasonUnavailable} {
		cfg.Metrics.AuthFailures.WithLabelValues(r)
	}
	return h, nil
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	tk, r2, err := extract(r)
	if err != nil {
		h.m.BadRequests.WithLabelValues(auth.ReasonAmbiguous).Inc()
		h.log.Warn("gateway: ambiguous credentials refused", "remote", r.RemoteAddr, "path", r.URL.Path, "error", err)
		auth.Reject(w, err) // 400
		return
	}
	if tk == "" {
		h.next.ServeHTTP(w, r)
		return
	}
	t, ok := controller.TargetFromRequest(r2)
	var c controller.Claims
	if !ok {
		err = &controller.TicketError{Reason: controller.ReasonWrongTarget, Detail: "a ticket opens only the pod exec, attach or portforward it names, not " + r.URL.Path}
	} else {
		c, err = h.v.Verify(tk, t)
	}
	if err != nil {
		reason := ReasonFull
		var te *controller.TicketError
		if errors.As(err, &te) {
			reason = te.Reason
		} else if errors.Is(err, ErrUnavailable) {
			reason = ReasonUnavailable
		}
		h.m.AuthFailures.WithLabelValues(reason).Inc()
		h.log.Warn("gateway: ticket refused", "remote", r.RemoteAddr, "path", r.URL.Path, "reason", reason,
			"user", c.User, "error", err)
		if reason == ReasonFull || reason == ReasonUnavailable {
			msg := err.Error()
			if reason == ReasonUnavailable {
				msg = ErrUnavailable.Error() // the store's error (addresses) stays in the log
			}
			w.Header().Set("Retry-After", "1")
			http.Error(w, "wsmux gateway: "+msg, http.StatusServiceUnavailable)
			return
		}
		auth.Reject(w, err)
		return
	}
	h.accepted.Inc()
	h.serveAs(w, r2, controller.User{ID: "ticket:" + c.User, Name: c.User, UID: c.UID, Groups: c.Groups})
}

// extract returns the request's ticket and a copy of the request without
// it (no ticket in the query or headers the gateway might log or pass
// on); "" if it carries none. A request with a ticket and any other
// credential, or with two tickets, is ambiguous: an *auth.Error.
func extract(r *http.Request) (string, *http.Request, error) {
	if err := auth.CheckUnambiguous(r); err != nil {
		return "", r, err
	}
	var tk string
	tickets, others := 0, 0
	if a := r.Header.Get("Authorization"); a != "" {
		if len(a) > 7 && strings.EqualFold(a[:7], "bearer ") && controller.IsTicket(strings.TrimSpace(a[7:])) {
			tk = strings.TrimSpace(a[7:])
			tickets++
		} else {
			others++
		}
	}
	var protos []string
	for _, v := range r.Header.Values("Sec-Websocket-Protocol") {
		for p := range strings.SplitSeq(v, ",") {
			p = strings.TrimSpace(p)
			if rest, ok := strings.CutPrefix(p, auth.BearerProtocolPrefix); ok {
				if b, err := base64.RawURLEncoding.DecodeString(rest); err == nil && controller.IsTicket(string(b)) {
					tk = string(b)
					tickets++
					continue
				}
				others++
			}
			protos = append(protos, p)
		}
	}
	var kept []string
	for kv := range strings.SplitSeq(r.URL.RawQuery, "&") {
		if k, v, _ := strings.Cut(kv, "="); k == "ticket" {
			tickets++
			tk = "?" // a ticket parameter that does not decode: malformed
			if s, err := url.QueryUnescape(v); err == nil {
				tk = s
			}
			continue
		}
		if kv != "" {
			kept = append(kept, kv)
		}
	}
	if tickets == 0 {
		return "", r, nil
	}
	if tickets+others > 1 {
		return "", r, &auth.Error{Reason: auth.ReasonAmbiguous, Detail: fmt.Sprintf(
			"%d credentials, %d of them tickets (Authorization header, ticket parameter, bearer subprotocol): send exactly one", tickets+others, tickets)}
	}
	r2 := r.Clone(r.Context())
	r2.Header.Del("Authorization")
	r2.Header.Del("Sec-Websocket-Protocol")
	if len(protos) > 0 {
		r2.Header.Set("Sec-Websocket-Protocol", strings.Join(protos, ", "))
	}
	r2.URL.RawQuery = strings.Join(kept, "&")
	r2.RequestURI = r2.URL.RequestURI()
	r2.Form = nil
	return tk, r2, nil
}
