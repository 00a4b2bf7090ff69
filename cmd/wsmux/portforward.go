package main

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/wsmux/wsmux/cmd/wsmux/internal/kubeclient"
)

func newPortForwardCmd(a *app) *cobra.Command {
	var cf clientFlags
	var namespace string
	var addresses []string
	c := &cobra.Command{
		Use:   "port-forward --server URL --token-file FILE [-n NAMESPACE] POD [LOCAL:]REMOTE...",
		Short: "Forward local ports to a pod through a wsmux gateway, like kubectl port-forward",
		Long: `Forward local ports to a pod through a wsmux gateway ('wsmux gateway'), with
client-go's port-forward protocol carried by one wsmux WebSocket (each
connection gets its own flow-controlled streams: a stalled connection never
blocks the others).

Ports as kubectl takes them: LOCAL:REMOTE, PORT (same both sides) or :REMOTE
(a free local port). Runs until SIGINT or SIGTERM, or until the connection to
the pod is lost (exit code 1). Exit code 3 when the gateway rejects the
credentials.`,
		Example: `  wsmux port-forward --server https://gw:8443 --token-file token -n shop web-0 8080:80 :5432`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 2 {
				return usageErrorf("want POD and at least one [LOCAL:]REMOTE port")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			token, tlsCfg, err := cf.load()
			if err != nil {
				return err
			}
			ctx, cancel := a.signalContext()
			defer cancel()
			err = kubeclient.PortForward(ctx, kubeclient.Options{Server: cf.server, Token: token, TLS: tlsCfg},
				kubeclient.PortForwardOptions{
					Namespace: namespace, Pod: args[0], Addresses: addresses, Ports: args[1:],
					Out: a.stdout, Err: a.stderr,
				}, nil)
			var ae *kubeclient.AuthError
			if errors.As(err, &ae) {
				return authError(err)
			}
			return err
		},
	}
	cf.register(c)
	c.Flags().StringVarP(&namespace, "namespace", "n", "default", "namespace of the pod")
	c.Flags().StringSliceVar(&addresses, "address", []string{"127.0.0.1"}, "local addresses to listen on, comma-separated")
	return c
}
