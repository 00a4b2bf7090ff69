package gateway

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"strings"
	"time"

	"github.com/wsmux/wsmux/controller"
	"github.com/wsmux/wsmux/gateway/sharedstate"
	"github.com/wsmux/wsmux/mux"
)

// Resume forwarding between the replicas of a fleet: a resume that
// reaches a replica not holding its session goes, with its upgrade
// spliced through, to the FleetHandler of the replica that does, which
// trusts the caller the first replica authenticated because the request
// carries an HMAC of it under the fleet's secret.

// Headers of a forwarded resume (set by the forwarding replica only:
// whatever a client sent under these names is replaced).
const (
	headerFleetCaller    = "Wsmux-Fleet-Caller"
	headerFleetClient    = "Wsmux-Fleet-Client"
	headerFleetTime      = "Wsmux-Fleet-Time"
	headerFleetSignature = "Wsmux-Fleet-Signature"
	// fleetSkew is how far the clocks of two replicas may differ (and how
	// long a captured forwarded request stays valid).
	fleetSkew = 30 * time.Second
)

// forwardedKey marks a request a replica forwarded here: it is served
// here, never forwarded again.
type forwardedKey struct{}

// sign is the MAC of a forwarded resume: the time, the request line, the
// resume token's digest, the caller and the client's address.
func (f *fleet) sign(ts, method, uri, tok, caller, client string) string {
	m := hmac.New(sha256.New, f.cfg.Secret)
	k := tokenKey(tok)
	for _, s := range []string{"wsmux-fleet-v1", ts, method, uri, hex.EncodeToString(k[:]), caller, client} {
		m.Write([]byte(s))
		m.Write([]byte{'\n'})
	}
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// ownerKey carries the owner's address to the forwarder's Rewrite.
type ownerKey struct{}

// fleetCaller is a controller.User as a forwarded resume carries it: its
// ID too (the resume registry binds a token to it).
type fleetCaller struct {
	ID     string   `json:"id"`
	Name   string   `json:"name"`
	UID    string   `json:"uid,omitempty"`
	Groups []string `json:"groups,omitempty"`
}

// newForwarder is the reverse proxy to an owner: the request's upgrade
// is spliced through once the owner answers 101.
func (f *fleet) newForwarder() *httputil.ReverseProxy {
	tr := &http.Transport{
		DialContext:           (&net.Dialer{Timeout: f.cfg.ForwardTimeout}).DialContext,
		ResponseHeaderTimeout: 10 * time.Second,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       30 * time.Second,
	}
	return &httputil.ReverseProxy{
		Transport: tr,
		Rewrite: func(pr *httputil.ProxyRequest) {
			addr, _ := pr.In.Context().Value(ownerKey{}).(string)
			pr.Out.URL.Scheme, pr.Out.URL.Host = "http", addr
			pr.Out.Host = addr
			h := pr.Out.Header
			for k := range h {
				if strings.HasPrefix(strings.ToLower(k), "wsmux-fleet-") {
					delete(h, k)
				}
			}
			h.Del("Authorization") // the caller was authenticated here; the owner trusts the MAC
			b, _ := json.Marshal(fleetCaller(callerOf(pr.In)))
			caller := base64.RawURLEncoding.EncodeToString(b)
			ts := strconv.FormatInt(time.Now().Unix(), 10)
			uri := pr.Out.URL.RequestURI()
			h.Set(headerFleetCaller, caller)
			h.Set(headerFleetClient, pr.In.RemoteAddr)
			h.Set(headerFleetTime, ts)
			h.Set(headerFleetSignature, f.sign(ts, pr.Out.Method, uri, h.Get(mux.HeaderResumeToken), caller, pr.In.RemoteAddr))
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			// The owner does not answer: it died (or is cut off), and its
			// sessions with it.
			f.forwards.WithLabelValues("owner_unreachable").Inc()
			f.g.logFor(r).Warn("gateway: resume refused: the replica holding the session does not answer; the client must open a new session",
				"remote", r.RemoteAddr, "owner", r.Context().Value(ownerKey{}), "error", err)
			unknownSession(w, "the gateway replica that held this session is gone: open a new session")
		},
		ErrorLog: slog.NewLogLogger(f.log.Handler(), slog.LevelWarn),
	}
}

// unknownSession answers a resume with the documented "unknown session"
// (docs/spec/wsmux-resume-v1.md): the client fails fast.
func unknownSession(w http.ResponseWriter, msg string) {
	w.Header().Set("Wsmux-Resume", "unknown")
	http.Error(w, "wsmux: "+msg, http.StatusNotFound)
}

// forwardResume sends r to the replica holding its session, if another
// one does; false: serve it here (held here, unknown to the fleet, or
// the store does not answer).
func (f *fleet) forwardResume(w http.ResponseWriter, r *http.Request) bool {
	if r.Context().Value(forwardedKey{}) != nil {
		return false
	}
	key := tokenKey(r.Header.Get(mux.HeaderResumeToken))
	var owner, addr string
	err := f.call(r.Context(), "resume_lookup", func(ctx context.Context) error {
		var err error
		owner, err = f.store.ResumeOwner(ctx, key)
		return err
	})
	switch {
	case errors.Is(err, sharedstate.ErrNotFound) || (err == nil && owner == f.cfg.Replica):
		return false
	case err != nil:
		f.forwards.WithLabelValues("store_unavailable").Inc()
		return false
	}
	err = f.call(r.Context(), "replica_lookup", func(ctx context.Context) error {
		var err error
		addr, err = f.store.ReplicaAddr(ctx, owner)
		return err
	})
	switch {
	case errors.Is(err, sharedstate.ErrNotFound):
		f.forwards.WithLabelValues("owner_gone").Inc()
		f.g.logFor(r).Warn("gateway: resume refused: the replica that held the session is gone; the client must open a new session",
			"remote", r.RemoteAddr, "owner", owner)
		unknownSession(w, "the gateway replica that held this session is gone: open a new session")
		return true
	case err != nil:
		f.forwards.WithLabelValues("store_unavailable").Inc()
		return false
	}
	f.forwards.WithLabelValues("forwarded").Inc()
	f.g.logFor(r).Info("gateway: resume forwarded to the replica holding the session", "remote", r.RemoteAddr, "owner", owner, "owner_address", addr)
	f.proxy.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), ownerKey{}, addr)))
	return true
}

// FleetHandler serves the resumes other replicas forward to this one
// (FleetConfig.Advertise): each must carry a valid MAC under the fleet's
// secret, else 401. Serve it on an address only the replicas reach.
func (g *Gateway) FleetHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f := g.fleet
		if f == nil || g.muxCfg.ResumeRegistry == nil {
			http.Error(w, "wsmux: this gateway is not in a fleet with resumption", http.StatusNotFound)
			return
		}
		tok := r.Header.Get(mux.HeaderResumeToken)
		caller, client, ts := r.Header.Get(headerFleetCaller), r.Header.Get(headerFleetClient), r.Header.Get(headerFleetTime)
		sec, err := strconv.ParseInt(ts, 10, 64)
		want := f.sign(ts, r.Method, r.URL.RequestURI(), tok, caller, client)
		var u controller.User
		var why string
		switch {
		case tok == "":
			why = "not a resume"
		case err != nil || time.Since(time.Unix(sec, 0)).Abs() > fleetSkew:
			why = "stale or missing " + headerFleetTime + " (clocks of the replicas more than 30 s apart?)"
		case !hmac.Equal([]byte(want), []byte(r.Header.Get(headerFleetSignature))):
			why = "bad " + headerFleetSignature + " (the replicas' --fleet-secret-file differ?)"
		default:
			var fc fleetCaller
			b, derr := base64.RawURLEncoding.DecodeString(caller)
			if derr != nil || json.Unmarshal(b, &fc) != nil || fc.ID == "" {
				why = "bad " + headerFleetCaller
			}
			u = controller.User(fc)
		}
		if why != "" {
			g.m.AuthFailures.WithLabelValues("fleet_forward").Inc()
			g.log.Warn("gateway: refused a forwarded resume: "+why, "remote", r.RemoteAddr)
			http.Error(w, "wsmux: refused forwarded resume: "+why, http.StatusUnauthorized)
			return
		}
		t, ok := controller.ParsePodPath(r.URL.Path)
		if !ok {
			g.badRequest(w, r, "bad_path", "a forwarded resume for "+r.URL.Path)
			return
		}
		r.RemoteAddr = client
		ctx := context.WithValue(r.Context(), userKey{}, u)
		ctx = context.WithValue(ctx, forwardedKey{}, true)
		g.serveResume(w, r.WithContext(ctx), u, t)
	})
}
