// Command controller-go is the smallest Go controller in front of `wsmux
// gateway` (docs/controller.md): it takes one bearer token as one user,
// lets that user into one namespace, then hands the socket off to the
// gateway (-handoff-socket) or redirects to it with a one-time ticket
// (-ticket-key, -gateway).
//
// It imports only the controller package and the standard library.
package main

import (
	"encoding/base64"
	"flag"
	"log"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/wsmux/wsmux/controller"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:8080", "address to listen on")
	token, user, ns := flag.String("token", "", "the one accepted bearer token"), flag.String("user", "alice", "its user"), flag.String("namespace", "default", "the namespace it may use")
	sock, keyFile, gw := flag.String("handoff-socket", "", "the gateway's --handoff-socket"), flag.String("ticket-key", "", "a --ticket-key file of the gateway"), flag.String("gateway", "", "the gateway's URL")
	flag.Parse()
	var key []byte
	if *keyFile != "" { // mint with the file's first key
		b, err := os.ReadFile(*keyFile)
		for _, l := range strings.Split(string(b), "\n") {
			if l = strings.TrimSpace(l); err == nil && key == nil && l != "" && l[0] != '#' {
				key, err = base64.StdEncoding.DecodeString(l)
			}
		}
		if err != nil || key == nil {
			log.Fatalf("-ticket-key %s: %v (want a base64 key per line)", *keyFile, err)
		}
	}
	http.HandleFunc("/api/v1/namespaces/", func(w http.ResponseWriter, r *http.Request) {
		t, ok := controller.TargetFromRequest(r)
		switch {
		case *token == "" || r.Header.Get("Authorization") != "Bearer "+*token:
			http.Error(w, "controller: unauthorized", http.StatusUnauthorized)
		case !ok || t.Namespace != *ns:
			http.Error(w, "controller: forbidden", http.StatusForbidden)
		case *sock != "":
			if err := controller.HandoffHTTP(w, r, *sock, controller.User{Name: *user}, t); err != nil {
				log.Print(err)
			}
		default:
			c, err := controller.NewClaims(controller.User{Name: *user}, t, time.Now(), 30*time.Second)
			if err == nil {
				var tk string
				if tk, err = controller.MintTicket(key, c); err == nil {
					http.Redirect(w, r, *gw+r.URL.Path+"?"+r.URL.RawQuery+"&ticket="+url.QueryEscape(tk), http.StatusTemporaryRedirect)
					return
				}
			}
			http.Error(w, err.Error(), http.StatusBadRequest)
		}
	})
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("controller-go: listening on http://%s", ln.Addr())
	log.Fatal(http.Serve(ln, nil))
}
