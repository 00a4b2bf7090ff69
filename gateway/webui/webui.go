// Package webui is the web terminal of `wsmux gateway` and `wsmux demo`,
// served at /ui/: xterm.js and the TypeScript WSMUX/1 client (clients/ts),
// bundled at build time into static/ and embedded in the binary, so the page
// needs no CDN and no network but the gateway's.
//
// Wrap also carries what a browser cannot send on a WebSocket upgrade: the
// bearer token and the Kubernetes stream protocol version travel as
// subprotocols (base64url.bearer.authorization.k8s.io.TOKEN, as Kubernetes'
// apiserver accepts, and x-stream-protocol-version.NAME), which Wrap turns
// into the Authorization and X-Stream-Protocol-Version headers of a wsmux.v1
// upgrade before the gateway sees it (the token also for other WebSocket
// protocols, such as a browser's v5.channel.k8s.io). It imports nothing of
// the gateway.
//
// At /ui/recordings/ it serves the replay page of the gateway's session
// recordings (asciinema-player), whose API (/ui/recordings/api/) it passes
// to the gateway.
//
// static/ is generated from clients/ts/web by `npm run bundle` in clients/ts
// and committed; `make test` checks that it is up to date.
//
// It imports only the standard library.
package webui

import (
	"embed"
	"encoding/base64"
	"io/fs"
	"net/http"
	"strings"
)

// Prefix is the path the terminal is served under.
const Prefix = "/ui/"

const (
	subprotocol     = "wsmux.v1"
	bearerPrefix    = "base64url.bearer.authorization.k8s.io."
	versionPrefix   = "x-stream-protocol-version."
	contentSecurity = "default-src 'self'; connect-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; " +
		"object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'none'"
	// The replay page's player runs its terminal as WebAssembly.
	replaySecurity = "default-src 'self'; script-src 'self' 'wasm-unsafe-eval'; connect-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; " +
		"object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'none'"
)

// Recordings is the replay page of session recordings; its API, under
// Recordings+"api/", is the gateway's (gateway.RecordingsAPI).
const Recordings = Prefix + "recordings/"

//go:embed static
var static embed.FS

// Wrap serves the terminal at /ui/ and passes every other request to next,
// after turning a browser's wsmux.v1 upgrade subprotocols into headers.
func Wrap(next http.Handler) http.Handler {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded tree is part of the binary
	}
	files := http.StripPrefix(Prefix, http.FileServer(http.FS(sub)))
	mux := http.NewServeMux()
	mux.Handle(Prefix, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		h := w.Header()
		if strings.HasPrefix(r.URL.Path, Recordings) {
			h.Set("Content-Security-Policy", replaySecurity)
		} else {
			h.Set("Content-Security-Policy", contentSecurity)
		}
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	}))
	toNext := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, fromBrowser(r))
	})
	mux.Handle(Recordings+"api/", toNext)
	mux.Handle("/", toNext)
	return mux
}

func versionProtocols(vs []string) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = versionPrefix + v
	}
	return out
}

// fromBrowser returns r with the bearer token subprotocol of a WebSocket
// upgrade moved into the Authorization header, and for wsmux.v1 also the
// stream protocol versions into X-Stream-Protocol-Version; r itself when it
// has none, or more than one token. A request that already has an
// Authorization header keeps it.
func fromBrowser(r *http.Request) *http.Request {
	offered := r.Header.Values("Sec-WebSocket-Protocol")
	var protos, versions []string
	var token string
	wsmux, browser := false, false
	tokens := 0
	for _, line := range offered {
		for _, p := range strings.Split(line, ",") {
			p = strings.TrimSpace(p)
			switch {
			case p == "":
			case strings.HasPrefix(p, bearerPrefix):
				browser = true
				tokens++
				if b, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(p, bearerPrefix)); err == nil {
					token = string(b)
				}
			case strings.HasPrefix(p, versionPrefix):
				browser = true
				versions = append(versions, strings.TrimPrefix(p, versionPrefix))
			default:
				wsmux = wsmux || p == subprotocol
				protos = append(protos, p)
			}
		}
	}
	if !browser || tokens > 1 {
		return r // two tokens: ambiguous, left for the gateway to refuse (400)
	}
	r = r.Clone(r.Context())
	if !wsmux {
		// Another protocol (a browser's v5.channel.k8s.io): only the token
		// moves, as the Kubernetes apiserver does it.
		protos = append(protos, versionProtocols(versions)...)
	}
	r.Header.Set("Sec-WebSocket-Protocol", strings.Join(protos, ", "))
	if token != "" && r.Header.Get("Authorization") == "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	if wsmux && len(versions) > 0 && len(r.Header.Values("X-Stream-Protocol-Version")) == 0 {
		for _, v := range versions {
			r.Header.Add("X-Stream-Protocol-Version", v)
		}
	}
	return r
}
