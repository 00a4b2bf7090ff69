package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	authnv1 "k8s.io/api/authentication/v1"

	"github.com/wsmux/wsmux/gateway/clustertest"
)

// TestGatewayTokenReviewFlag: `wsmux gateway` with only
// --authentication-token-webhook-config-file: a token the webhook
// authenticates runs exec as its user; one it rejects exits 3 with its
// reason; a webhook kubeconfig that cannot be read is a usage error.
// (TLS: client-go applies a kubeconfig's credentials to https servers
// only.)
func TestGatewayTokenReviewFlag(t *testing.T) {
	webhook := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var tr authnv1.TokenReview
		if err := json.NewDecoder(r.Body).Decode(&tr); err != nil || r.Header.Get("Authorization") != "Bearer hook-secret" {
			http.Error(w, "bad review request", http.StatusBadRequest)
			return
		}
		if tr.Spec.Token == "reviewed-token" {
			tr.Status = authnv1.TokenReviewStatus{Authenticated: true, User: authnv1.UserInfo{Username: "alice", Groups: []string{"dev"}}}
		} else {
			tr.Status.Error = "unknown token"
		}
		json.NewEncoder(w).Encode(tr)
	}))
	defer webhook.Close()
	hookConfig := writeFile(t, "webhook-kubeconfig", `apiVersion: v1
kind: Config
clusters: [{name: hook, cluster: {server: "`+webhook.URL+`/authenticate", certificate-authority-data: `+
		base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: webhook.Certificate().Raw}))+`}}]
users: [{name: gw, user: {token: hook-secret}}]
contexts: [{name: hook, context: {cluster: hook, user: gw}}]
current-context: hook
`)
	cl := clustertest.Start(t)
	kubeconfig := writeFile(t, "kubeconfig", cl.Kubeconfig())
	addr := freeAddr(t)
	stop := background(t, "gateway", "--listen", addr, "--kubeconfig", kubeconfig,
		"--authentication-token-webhook-config-file", hookConfig)
	defer stop()
	server := "http://" + addr
	waitHTTP(t, server+"/healthz")
	defer http.DefaultClient.CloseIdleConnections()

	good := writeFile(t, "good", "reviewed-token\n")
	code, out, errOut := invoke(context.Background(), strings.NewReader("reviewed"),
		"exec", "--server", server, "--token-file", good, "web-0", "-i", "--", "cat")
	if code != 0 || out != "reviewed" {
		t.Errorf("reviewed token: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if imps := cl.Impersonations(); len(imps) == 0 || imps[len(imps)-1].User != "alice" {
		t.Errorf("the cluster saw %+v, want alice", imps)
	}
	bad := writeFile(t, "bad", "other-token\n")
	code, _, errOut = invoke(context.Background(), nil, "exec", "--server", server, "--token-file", bad, "web-0", "--", "cat")
	if code != exitAuth || !strings.Contains(errOut, "unknown token") {
		t.Errorf("rejected token: exit %d, stderr %q", code, errOut)
	}

	code, _, errOut = invoke(context.Background(), nil, "gateway", "--listen", "127.0.0.1:0", "--kubeconfig", kubeconfig,
		"--authentication-token-webhook-config-file", hookConfig+".missing")
	if code != exitUsage || !strings.Contains(errOut, "--authentication-token-webhook-config-file") {
		t.Errorf("missing webhook kubeconfig: exit %d, stderr %q", code, errOut)
	}
}
