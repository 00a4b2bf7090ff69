package gateway_test

import (
	"bytes"
	"context"
	"fmt"
	"log"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/wsmux/wsmux/controller"
	"github.com/wsmux/wsmux/gateway"
	"github.com/wsmux/wsmux/gateway/auth"
	"github.com/wsmux/wsmux/gateway/clustertest"
	"github.com/wsmux/wsmux/gateway/kubeclient"
)

// Example embeds the gateway in a program's own http.Server, beside the
// program's own routes: callers with the token exec, attach and
// port-forward into the cluster's pods through it, with kubectl or any
// wsmux client, as the gateway's identity (Config.Impersonate acts as each
// caller instead). The cluster here is `wsmux demo`'s stand-in; yours
// comes from rest.InClusterConfig or a kubeconfig.
func Example() {
	cluster, err := clustertest.New(clustertest.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer cluster.Close()

	gw, err := gateway.New(gateway.Config{
		Auth:    auth.New([]string{"s3cret"}, nil),
		Cluster: cluster.RestConfig(),
	})
	if err != nil {
		log.Fatal(err)
	}
	routes := http.NewServeMux()
	routes.HandleFunc("/hello", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "my own route") })
	routes.Handle("/api/", gw.Handler())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	srv := &http.Server{Handler: routes, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	defer srv.Shutdown(context.Background())

	// A client: what `wsmux exec` and kubectl do.
	var out bytes.Buffer
	err = kubeclient.Exec(context.Background(),
		kubeclient.Options{Server: "http://" + ln.Addr().String(), Token: "s3cret"},
		kubeclient.ExecOptions{Namespace: "default", Pod: "web-0", Command: []string{"cat"},
			Stdin: strings.NewReader("hello from the pod\n"), Stdout: &out})
	fmt.Print(out.String())
	fmt.Println("error:", err)
	// Output:
	// hello from the pod
	// error: <nil>
}

// headerAuth trusts the user name that the program's own front proxy put
// in X-Forwarded-User (after its own login), for requests from that proxy.
type headerAuth struct{ proxy string }

func (a headerAuth) Authenticate(r *http.Request) (controller.User, error) {
	host, _, _ := net.SplitHostPort(r.RemoteAddr)
	names := r.Header.Values("X-Forwarded-User")
	if host != a.proxy || len(names) != 1 || names[0] == "" {
		return controller.User{}, &auth.Error{Reason: auth.ReasonMissing, Detail: "not through the login proxy"}
	}
	return controller.User{ID: "proxy:" + names[0], Name: names[0], Groups: []string{"developers"}}, nil
}

// Example_authenticator brings its own auth.Authenticator: the gateway acts
// upstream as the user it returns (impersonation), so the cluster's RBAC
// decides what each caller may do; the gateway's own identity needs the
// impersonate verb.
func Example_authenticator() {
	cluster, err := clustertest.New(clustertest.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer cluster.Close()
	gw, err := gateway.New(gateway.Config{
		Auth:        headerAuth{proxy: "127.0.0.1"},
		Impersonate: true,
		Cluster:     cluster.RestConfig(),
	})
	if err != nil {
		log.Fatal(err)
	}
	srv := &http.Server{Handler: gw.Handler(), ReadHeaderTimeout: 10 * time.Second}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	go srv.Serve(ln)
	defer srv.Shutdown(context.Background())

	// What the login proxy sends on: a plain request here, to show the
	// identity the cluster sees.
	req, _ := http.NewRequest(http.MethodGet, "http://"+ln.Addr().String()+"/api/v1/namespaces/default/pods/web-0", nil)
	req.Header.Set("X-Forwarded-User", "alice")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	resp.Body.Close()
	for _, im := range cluster.Impersonations() {
		fmt.Printf("%s %v\n", im.User, im.Groups)
	}
	// Output:
	// alice [developers]
}
