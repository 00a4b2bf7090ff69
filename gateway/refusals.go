package gateway

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"strconv"

	"github.com/wsmux/wsmux/controller"
	"github.com/wsmux/wsmux/gateway/origin"
)

// badRequest answers 400. Every refusal of the gateway is a
// metav1.Status body (what kubectl and client-go decode), a count, and a
// log line that names the caller once the request is authenticated.
func (g *Gateway) badRequest(w http.ResponseWriter, r *http.Request, reason, msg string, kv ...any) {
	g.m.BadRequests.WithLabelValues(reason).Inc()
	g.logFor(r).Warn("gateway: bad request: "+msg, append([]any{"remote", r.RemoteAddr, "method", r.Method, "path", r.URL.Path}, kv...)...)
	writeStatus(w, http.StatusBadRequest, "BadRequest", "wsmux gateway: "+msg) // kubectl prints a Status's message
}

// userKey carries the caller's controller.User in a request's context.
type userKey struct{}

// callerOf returns the caller stored by serveStreaming.
func callerOf(r *http.Request) controller.User {
	u, _ := r.Context().Value(userKey{}).(controller.User)
	return u
}

// logFor returns the logger of r's lines: once r is authenticated, with
// its caller and user, so that every refusal of a caller names it.
func (g *Gateway) logFor(r *http.Request) *slog.Logger {
	if u, ok := r.Context().Value(userKey{}).(controller.User); ok {
		return g.log.With("caller", u.ID, "user", u.Name)
	}
	return g.log
}

// forbidden answers 403 with a metav1.Status body (what kubectl and
// client-go decode) and a log line.
func (g *Gateway) forbidden(w http.ResponseWriter, r *http.Request, u controller.User, msg string) {
	g.m.BadRequests.WithLabelValues("forbidden").Inc()
	g.log.Warn("gateway: refused: "+msg, "remote", r.RemoteAddr, "caller", u.ID, "user", u.Name, "path", r.URL.Path)
	writeStatus(w, http.StatusForbidden, "Forbidden", "wsmux gateway: "+msg)
}

func writeStatus(w http.ResponseWriter, code int, reason, msg string) {
	b, _ := json.Marshal(map[string]any{"kind": "Status", "apiVersion": "v1", "metadata": map[string]any{},
		"status": "Failure", "message": msg, "reason": reason, "code": code})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

// crossOrigin answers 403 to a request from a web page of another origin.
func (g *Gateway) crossOrigin(w http.ResponseWriter, r *http.Request, oe *origin.Error) {
	g.m.BadRequests.WithLabelValues("cross_origin").Inc()
	g.logFor(r).Warn("gateway: refused: "+oe.Error(), "remote", r.RemoteAddr, "method", r.Method, "path", r.URL.Path)
	writeStatus(w, http.StatusForbidden, "Forbidden", "wsmux gateway: "+oe.Error()+
		": a web page of another site may not use your browser's credentials here; if that page is yours, start the gateway with --allowed-origins "+originHint(oe.Origin))
}

// originHint is what to put in --allowed-origins for a refused Origin
// header: itself when it can be allowed, else a placeholder.
func originHint(o string) string {
	if _, err := origin.Parse([]string{o}); err != nil || o == "" {
		return "SCHEME://HOST[:PORT]"
	}
	return o
}

// badHandshake says what is wrong with a WebSocket upgrade request's
// handshake (RFC 6455 4.2.1), or "".
func badHandshake(r *http.Request) string {
	if r.Method != http.MethodGet {
		return "method " + r.Method + ", want GET"
	}
	if v := r.Header.Get("Sec-Websocket-Version"); v != "13" {
		return "Sec-WebSocket-Version " + strconv.Quote(v) + ", want 13"
	}
	if k, err := base64.StdEncoding.DecodeString(r.Header.Get("Sec-Websocket-Key")); err != nil || len(k) != 16 {
		return "Sec-WebSocket-Key is not the base64 of 16 bytes"
	}
	return ""
}

// statusWriter records whether a handler that upgrades the connection
// itself (Kubernetes' translator and tunnelling handlers) hijacked it, or
// the status it answered instead.
type statusWriter struct {
	http.ResponseWriter
	status   int
	hijacked bool
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	w.hijacked = true
	return http.NewResponseController(w.ResponseWriter).Hijack()
}

// Unwrap lets http.ResponseController reach the server's writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
