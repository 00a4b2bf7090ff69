package main

import (
	"crypto/x509"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/wsmux/wsmux/gateway"
	"github.com/wsmux/wsmux/gateway/auth"
	"github.com/wsmux/wsmux/gateway/ops"
	"github.com/wsmux/wsmux/gateway/webui"
)

func newGatewayCmd(a *app) *cobra.Command {
	var sf serverFlags
	var clientCA, kubeconfig, kubeContext, upstream string
	var impersonate bool
	var policyFile string
	var reloadEvery time.Duration
	var rf reviewFlags
	var lf limitFlags
	var resf resumeFlag
	var aff affinityFlag
	var cf controllerFlags
	var ff fleetFlags
	var recf recordingFlags
	c := &cobra.Command{
		Use:   "gateway --listen ADDR --token-file FILE [--client-ca CA] --kubeconfig FILE",
		Short: "Authenticated exec/attach/port-forward gateway in front of a Kubernetes cluster",
		Long: `Accept wsmux upgrades, unmodified kubectl's and client-go's WebSocket
protocols (v5.channel.k8s.io and v4.channel.k8s.io exec/attach, the
SPDY/3.1+portforward.k8s.io port-forward tunnel) and legacy SPDY upgrades,
all on the same port, for

  /api/v1/namespaces/{namespace}/pods/{pod}/exec
  /api/v1/namespaces/{namespace}/pods/{pod}/attach
  /api/v1/namespaces/{namespace}/pods/{pod}/portforward

authenticate the caller, and forward the session to the cluster with the
kubeconfig's credentials (SPDY by default, as every apiserver speaks it; wsmux
with --upstream wsmux). Callers never see the cluster credentials and the
cluster never sees the callers' tokens; the query string (command, container,
stdin, tty...) is passed through, and every upstream request impersonates
the caller (Impersonate-User/-Uid/-Group; --impersonate=false turns it off),
so the cluster's RBAC decides what each caller may do.

Every other request (kubectl's GET of the pod, discovery) is proxied to the
cluster as the caller, so kubectl needs only --server, --token and
--certificate-authority pointing at the gateway.

Authentication: "Authorization: Bearer TOKEN" with a token from --token-file,
in kube-apiserver's static token format, one per line:

  TOKEN,USER[,UID[,"GROUP1,GROUP2"]]

(compared in constant time; reloaded on SIGHUP and when the file changes, a
file that does not parse keeps the previous tokens; other tokens go to the
TokenReview webhook of --authentication-token-webhook-config-file when set),
or, with --client-ca (needs --tls-cert), a TLS
client certificate signed by that CA (a presented certificate that does not
verify is rejected even with a valid token). Unauthenticated requests get 401,
malformed paths and non-upgrade requests 400, each with a plain-text body
saying why, a log line and a wsmux_auth_failures_total/wsmux_bad_requests_total
count; nothing is forwarded for them. A request that carries its credential
twice (two Authorization headers, say) gets 400.

Browsers: a request with an Origin header (every WebSocket upgrade a web page
makes) must come from the gateway's own origin (the scheme and Host it came
to) or one of --allowed-origins, else it gets 403 whatever its credentials,
so another site's page cannot use a browser's client certificate or cookies.
kubectl, client-go and wsmux send no Origin.

Connections: a kept-alive connection idle for --idle-timeout is closed, and
connections beyond --max-connections (on --listen, and handed-off ones on
--handoff-socket) are closed at once and counted.

Also serves /healthz and /metrics (Prometheus) without authentication, and
at /ui/ a web terminal (exec with a TTY over wsmux from the browser; the
token is asked for in the page). On
SIGTERM or SIGINT: stop accepting, GOAWAY every wsmux session, let sessions
finish for --shutdown-timeout, then close what is left.`,
		Example: `  wsmux gateway --listen :8443 --tls-cert tls.crt --tls-key tls.key \
      --token-file tokens --client-ca clients-ca.crt --kubeconfig gateway.kubeconfig`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if sf.tokenFile == "" && clientCA == "" && !rf.set() {
				return usageErrorf("--token-file, --client-ca or --authentication-token-webhook-config-file is required: the gateway never runs unauthenticated")
			}
			if clientCA != "" && sf.tlsCert == "" {
				return usageErrorf("--client-ca needs --tls-cert/--tls-key (client certificates need TLS)")
			}
			if upstream != gateway.UpstreamSPDY && upstream != gateway.UpstreamWsmux {
				return usageErrorf("--upstream %q: want spdy or wsmux", upstream)
			}
			if err := lf.validate(); err != nil {
				return err
			}
			if err := resf.validate(); err != nil {
				return err
			}
			if err := ff.validate(resf.timeout > 0); err != nil {
				return err
			}
			affinity, err := aff.cookie()
			if err != nil {
				return err
			}
			if err := sf.validate(); err != nil {
				return err
			}
			var tokens []auth.Token
			if sf.tokenFile != "" {
				t, err := auth.ReadTokenFile(sf.tokenFile)
				if err != nil {
					return usageErrorf("--token-file: %v", err)
				}
				if impersonate {
					for _, tk := range t {
						if tk.User.Name == "" {
							return usageErrorf("--token-file %s: a token has no user; the gateway acts as each caller's user (impersonation): write lines as TOKEN,USER[,UID[,\"GROUP1,GROUP2\"]], or pass --impersonate=false to let every caller act as the gateway's own identity", sf.tokenFile)
						}
					}
				}
				tokens = t
			}
			var pool *x509.CertPool
			if clientCA != "" {
				p, err := auth.LoadCertPool(clientCA)
				if err != nil {
					return usageErrorf("--client-ca: %v", err)
				}
				pool = p
			}
			m := ops.NewMetrics()
			var policy *gateway.PolicyStore
			if policyFile != "" {
				policy = &gateway.PolicyStore{}
				pr := &auth.FileReloader{Path: policyFile, What: "policy file", Log: a.log, OnReload: m.ReloadHook("policy_file"), Load: func(b []byte) error {
					p, err := gateway.ParsePolicy(b)
					if err == nil {
						policy.Set(p)
					}
					return err
				}}
				if err := pr.Reload(); err != nil {
					return usageErrorf("--policy-file: %v", err)
				}
				if reloadEvery > 0 {
					stop := make(chan struct{})
					defer close(stop)
					go pr.Watch(stop, reloadEvery)
				}
			}
			cluster, err := loadCluster(kubeconfig, kubeContext)
			if err != nil {
				return usageErrorf("--kubeconfig: %v: pass a kubeconfig for the cluster (or run in a pod)", err)
			}
			stopRecording := make(chan struct{})
			defer close(stopRecording)
			recorder, err := recf.recorder(a, m, reloadEvery, stopRecording)
			if err != nil {
				return err
			}
			authn := auth.NewWithUsers(tokens, pool)
			if err := rf.apply(authn); err != nil {
				return err
			}
			if sf.tokenFile != "" && reloadEvery > 0 {
				rl := &auth.TokenFileReloader{Path: sf.tokenFile, Auth: authn, Log: a.log, OnReload: m.ReloadHook("token_file")}
				_ = rl.Reload() // read above; this records the file's state
				stop := make(chan struct{})
				defer close(stop)
				go rl.Watch(stop, reloadEvery)
			}
			// A replica of a fleet (--shared-state): cmd/wsmux/fleet.go.
			fleet, err := ff.start(a)
			if err != nil {
				return err
			}
			var fleetCfg *gateway.FleetConfig
			if fleet != nil {
				defer fleet.close()
				fleetCfg = fleet.cfg
			}
			g, err := gateway.New(gateway.Config{
				Auth: authn, Origins: sf.origins, Impersonate: impersonate, Policy: policy, Cluster: cluster, Upstream: upstream, Limits: lf.limits(),
				DrainTimeout: drainBound(sf.shutdownTimeout), ResumeTimeout: resf.timeout, AffinityCookie: affinity, Logger: a.log, Metrics: m,
				Fleet:     fleetCfg,
				Recording: recorder,
			})
			if err != nil {
				return usageErrorf("%v", err)
			}
			defer g.Close()
			if fleet != nil {
				fleet.serve(a, g)
				cf.sharedTickets = g.SharedTickets()
			}
			cf.maxConns = sf.conns().MaxConns // each listener has its own
			h, stopControllers, err := cf.start(a, g, g.Handler(), reloadEvery)
			if err != nil {
				return err
			}
			defer stopControllers()
			return sf.serve(a, webui.Wrap(h), pool != nil, g.Metrics(), g.Health(), "gateway",
				"client_ca", clientCA != "", "cluster", cluster.Host, "upstream", upstream)
		},
	}
	sf.register(c, "127.0.0.1:8443")
	fl := c.Flags()
	fl.StringVar(&clientCA, "client-ca", "", "PEM CA bundle: accept TLS client certificates it signs (needs --tls-cert)")
	fl.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig with the cluster and the credentials to reach it (default: $KUBECONFIG, ~/.kube/config, or in-cluster)")
	fl.StringVar(&kubeContext, "context", "", "kubeconfig context to use (default: its current context)")
	fl.BoolVar(&impersonate, "impersonate", true, "act upstream as each caller (Impersonate-User/-Uid/-Group), so the cluster's RBAC decides; false: every caller acts as the gateway's identity")
	fl.DurationVar(&reloadEvery, "token-file-check", 2*time.Second, "how often to check --token-file and --policy-file for changes and reload them (SIGHUP reloads at once; 0: never)")
	fl.StringVar(&policyFile, "policy-file", "", "YAML rules (users/groups -> namespaces, pods, subresources, containers) checked before anything goes upstream; see docs/gateway.md")
	fl.StringVar(&upstream, "upstream", gateway.UpstreamSPDY, "protocol spoken to the cluster: spdy or wsmux")
	lf.register(c, false)
	resf.registerServer(c)
	aff.register(c)
	rf.register(c)
	cf.register(c)
	ff.register(c)
	recf.register(c)
	return c
}

// loadCluster reads the kubeconfig (the usual loading rules when path is
// empty; in-cluster when there is none).
func loadCluster(path, context string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if path != "" {
		rules.ExplicitPath = path
	}
	cfg := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: context})
	return cfg.ClientConfig()
}
