package main

import (
	"net"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/wsmux/wsmux/gateway/kubeclient"
)

func newPortForwardCmd(a *app) *cobra.Command {
	var cf clientFlags
	var rf resumeFlag
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
				return usageErrorf("want POD and at least one [LOCAL:]REMOTE port: wsmux port-forward POD 8080:80")
			}
			if err := checkName("POD", args[0]); err != nil {
				return err
			}
			if err := checkName("--namespace", namespace); err != nil {
				return err
			}
			for _, p := range args[1:] {
				if err := checkPortSpec(p); err != nil {
					return err
				}
			}
			for _, a := range addresses {
				if a != "localhost" && net.ParseIP(a) == nil {
					return usageErrorf("--address %q: want an IP address or localhost", a)
				}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := rf.validate(); err != nil {
				return err
			}
			token, tlsCfg, err := cf.load()
			if err != nil {
				return err
			}
			ctx, cancel := a.signalContext()
			defer cancel()
			o := kubeclient.Options{Server: cf.server, Token: token, TLS: tlsCfg, DialTimeout: cf.dialTimeout,
				ResumeTimeout: rf.timeout, OnResumeEvent: rf.logTo(a.log, "port-forward")}
			err = kubeclient.PortForward(ctx, o,
				kubeclient.PortForwardOptions{
					Namespace: namespace, Pod: args[0], Addresses: addresses, Ports: args[1:],
					Out: a.stdout, Err: a.stderr,
				}, nil)
			if err == nil {
				return nil
			}
			return connectError(err, cf.server, o.RequestLine(namespace, args[0], "portforward"), cf.dialTimeout)
		},
	}
	cf.register(c)
	rf.register(c)
	c.Flags().StringVarP(&namespace, "namespace", "n", "default", "namespace of the pod")
	c.Flags().StringSliceVar(&addresses, "address", []string{"127.0.0.1"}, "local addresses to listen on, comma-separated")
	return c
}

// checkPortSpec validates a port as kubectl takes it: LOCAL:REMOTE, PORT or
// :REMOTE, every port a number from 1 to 65535 (LOCAL may be 0: any).
func checkPortSpec(spec string) error {
	local, remote, found := strings.Cut(spec, ":")
	if !found {
		local, remote = spec, spec
	}
	if n, err := strconv.Atoi(remote); err != nil || n < 1 || n > 65535 {
		return usageErrorf("port %q: remote port %q: want a number from 1 to 65535 ([LOCAL:]REMOTE, for example 8080:80)", spec, remote)
	}
	if local == "" {
		return nil
	}
	if n, err := strconv.Atoi(local); err != nil || n < 0 || n > 65535 {
		return usageErrorf("port %q: local port %q: want a number from 0 to 65535 ([LOCAL:]REMOTE, for example 8080:80)", spec, local)
	}
	return nil
}
