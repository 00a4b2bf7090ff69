// Package cookiekeep keeps the cookies a server sets in its answers to a
// client's WebSocket upgrades (Set-Cookie on the 101) and sends them back
// with the client's later upgrades of the same session (its resumes): what
// a load balancer's cookie affinity, or a replica's own cookie, needs to
// bring a resume to the replica that holds the session. mux.Dialer uses
// it; it imports only the standard library and must not import mux.
package cookiekeep

import (
	"net/http"
	"slices"
	"strings"
	"sync"
)

// Jar holds the cookies kept so far. The zero value is empty and ready;
// it is safe for concurrent use.
type Jar struct {
	mu    sync.Mutex
	kept  []*http.Cookie
	named map[string]bool // every cookie name the server set, kept or dropped
}

// Keep merges the cookies the answer header h sets: a cookie set again
// replaces the old value, one set with Max-Age <= 0 or an expiry in the
// past (MaxAge < 0 once parsed) is dropped.
func (j *Jar) Keep(h http.Header) {
	set := (&http.Response{Header: h}).Cookies()
	if len(set) == 0 {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.named == nil {
		j.named = map[string]bool{}
	}
	for _, c := range set {
		j.named[c.Name] = true
		j.kept = slices.DeleteFunc(j.kept, func(o *http.Cookie) bool { return o.Name == c.Name })
		if c.MaxAge >= 0 {
			j.kept = append(j.kept, &http.Cookie{Name: c.Name, Value: c.Value})
		}
	}
}

// Apply sets the Cookie header of the request header h to h's own
// cookies (those of names the server never set) followed by the kept
// ones, or removes it when none is left.
func (j *Jar) Apply(h http.Header) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if len(j.named) == 0 {
		return // nothing set: h's own cookies go as they are
	}
	var parts []string
	for _, c := range (&http.Request{Header: http.Header{"Cookie": h.Values("Cookie")}}).Cookies() {
		if !j.named[c.Name] {
			parts = append(parts, c.String())
		}
	}
	for _, c := range j.kept {
		parts = append(parts, c.String())
	}
	if len(parts) == 0 {
		h.Del("Cookie")
		return
	}
	h.Set("Cookie", strings.Join(parts, "; "))
}
