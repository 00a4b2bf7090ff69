// Package origin decides which web pages may use a server from a browser.
//
// A browser attaches some credentials to every request on its own: TLS
// client certificates, cookies, HTTP basic credentials it remembers, and
// whatever a proxy in front of the server derives from them. A WebSocket
// upgrade is not subject to the same-origin policy, so without a check any
// page a user visits could open an exec with that user's certificate
// (cross-site WebSocket hijacking). Browsers name the page's origin in the
// Origin header, which a page cannot change; clients that are not browsers
// (kubectl, client-go, the wsmux CLI) send none. Policy lets through
// requests without Origin, requests from the server's own origin (the
// scheme and Host they came to) and requests from the origins it lists;
// it refuses the others.
//
// It imports only the standard library.
package origin

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
)

// Policy is the server's own origin plus the origins it allows. The zero
// value and nil allow the server's own origin only.
type Policy struct {
	allowed map[string]bool // canonical: scheme://host:port
}

// Parse returns a Policy allowing the listed origins (SCHEME://HOST[:PORT],
// http or https; case and a trailing slash do not matter; a default port
// may be given or not) besides the server's own.
func Parse(origins []string) (*Policy, error) {
	p := &Policy{allowed: map[string]bool{}}
	for _, o := range origins {
		s := strings.TrimSpace(o)
		if s == "" {
			continue
		}
		switch strings.ToLower(s) {
		case "null":
			return nil, fmt.Errorf("origin %q: the null origin is what sandboxed frames, local files and cross-site redirects send; any page can make a browser send it, so it cannot be allowed", o)
		case "*":
			return nil, fmt.Errorf("origin %q: no wildcard; list the origins of the pages that may use this server, SCHEME://HOST[:PORT]", o)
		}
		c, err := canonical(strings.TrimSuffix(s, "/"))
		if err != nil {
			return nil, fmt.Errorf("origin %q: %v: want SCHEME://HOST[:PORT], for example https://console.example.com", o, err)
		}
		p.allowed[c] = true
	}
	return p, nil
}

// Allowed returns the allowed origins (besides the server's own), sorted,
// in their canonical form.
func (p *Policy) Allowed() []string {
	if p == nil {
		return nil
	}
	out := make([]string, 0, len(p.allowed))
	for o := range p.allowed {
		out = append(out, display(o))
	}
	sort.Strings(out)
	return out
}

// Error is a refused Origin.
type Error struct {
	// Origin is the request's Origin header (all of them, if several).
	Origin string
	// Own is the server's own origin as the request reached it.
	Own string
	// Why says what is wrong with it.
	Why string
}

func (e *Error) Error() string {
	return fmt.Sprintf("Origin %s: %s", e.Origin, e.Why)
}

// Check returns nil when r may go on: it has no Origin header (not a
// browser), or its Origin is the server's own or allowed. Otherwise it
// returns an *Error saying why.
func (p *Policy) Check(r *http.Request) *Error {
	vs := r.Header.Values("Origin")
	if len(vs) == 0 {
		return nil
	}
	own := Own(r)
	e := &Error{Origin: strings.Join(vs, ", "), Own: display(own)}
	if len(vs) > 1 {
		e.Why = "more than one Origin header"
		return e
	}
	if strings.EqualFold(strings.TrimSpace(vs[0]), "null") {
		e.Why = "the null origin (a sandboxed frame, a local file or a redirect across sites) is never allowed"
		return e
	}
	c, err := canonical(strings.TrimSpace(vs[0]))
	if err != nil {
		e.Why = "not an origin (" + err.Error() + ")"
		return e
	}
	if (own != "" && c == own) || (p != nil && p.allowed[c]) {
		return nil
	}
	e.Why = "neither this server's own origin (" + e.Own + ") nor an allowed one"
	return e
}

// Own returns the server's own origin as r reached it, in canonical form:
// https when r came over TLS (or, without TLS, when X-Forwarded-Proto says
// https: a proxy in front ended TLS; a page cannot set that header on the
// requests it makes a browser send), and r's Host, with the scheme's
// default port when it names none. "" when r has no usable Host.
func Own(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	} else if p, _, _ := strings.Cut(r.Header.Get("X-Forwarded-Proto"), ","); strings.EqualFold(strings.TrimSpace(p), "https") {
		scheme = "https"
	}
	c, err := canonical(scheme + "://" + r.Host)
	if err != nil {
		return ""
	}
	return c
}

// canonical parses an origin (SCHEME://HOST[:PORT]) into
// scheme://host:port, lower case, with the scheme's default port.
func canonical(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil {
		return "", err
	}
	scheme := strings.ToLower(u.Scheme)
	var def string
	switch scheme {
	case "https":
		def = "443"
	case "http":
		def = "80"
	default:
		return "", fmt.Errorf("scheme %q, want http or https", u.Scheme)
	}
	switch {
	case u.Opaque != "" || u.User != nil || u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.ForceQuery:
		return "", fmt.Errorf("an origin has no user, path, query or fragment")
	case u.Hostname() == "":
		return "", fmt.Errorf("no host")
	}
	port := u.Port()
	if port == "" {
		if strings.HasSuffix(u.Host, ":") {
			return "", fmt.Errorf("empty port")
		}
		port = def
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("port %q", port)
	}
	return scheme + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port), nil
}

// display drops the default port of a canonical origin.
func display(c string) string {
	if s, ok := strings.CutSuffix(c, ":443"); ok && strings.HasPrefix(c, "https://") {
		return s
	}
	if s, ok := strings.CutSuffix(c, ":80"); ok && strings.HasPrefix(c, "http://") {
		return s
	}
	return c
}
