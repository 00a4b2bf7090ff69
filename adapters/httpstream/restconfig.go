package httpstream

import (
	"fmt"
	"net/http"
	"time"

	"k8s.io/client-go/rest"
)

// RoundTripperFor is client-go's transport/spdy.RoundTripperFor for wsmux:
// from a *rest.Config (what a kubeconfig or the in-cluster configuration
// gives) it builds the round tripper to make upgrade requests with and the
// upgrader that owns the connection they dial, in one call. The TLS
// settings (CA, client certificate, server name, insecure), the proxy
// (config.Proxy, else the environment), and the authentication wrappers
// (bearer token and token file, basic auth, exec and auth-provider
// plugins, impersonation, user agent, config.WrapTransport) are those
// client-go applies to the same config.
//
// The two results go where client-go takes the SPDY pair:
//
//	rt, up, err := httpstream.RoundTripperFor(config)
//	exec, err := remotecommand.NewSPDYExecutorForTransports(rt, up, "POST", url)
//	dialer := spdy.NewDialer(up, &http.Client{Transport: rt}, "POST", url)
//
// Keepalive PINGs go out every 5 s of silence, as with client-go's SPDY
// round tripper. Each pair dials one connection; build a new one per
// connection, as with SPDY.
func RoundTripperFor(config *rest.Config) (http.RoundTripper, *RoundTripper, error) {
	return RoundTripperForWithConfig(config, RoundTripperConfig{PingPeriod: 5 * time.Second})
}

// RoundTripperForWithConfig is RoundTripperFor with the other settings of
// cfg (Resume, ResumeTimeout, OnResumeEvent, PingPeriod, Config); its TLS,
// Proxier and UpgradeTransport are ignored: they come from config. For
// session resumption:
//
//	rt, up, err := httpstream.RoundTripperForWithConfig(config, httpstream.RoundTripperConfig{
//		Resume: true, PingPeriod: 5 * time.Second,
//		OnResumeEvent: func(e httpstream.ResumeEvent) { log.Print("exec: connection ", e.Kind) },
//	})
func RoundTripperForWithConfig(config *rest.Config, cfg RoundTripperConfig) (http.RoundTripper, *RoundTripper, error) {
	if config == nil {
		return nil, nil, fmt.Errorf("wsmux RoundTripperFor: nil *rest.Config")
	}
	tlsConfig, err := rest.TLSConfigFor(config)
	if err != nil {
		return nil, nil, fmt.Errorf("wsmux RoundTripperFor: TLS configuration: %w", err)
	}
	proxy := http.ProxyFromEnvironment
	if config.Proxy != nil {
		proxy = config.Proxy
	}
	cfg.TLS, cfg.Proxier, cfg.UpgradeTransport = tlsConfig, proxy, nil
	up, err := NewRoundTripperWithConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	wrapped, err := rest.HTTPWrappersForConfig(config, up)
	if err != nil {
		return nil, nil, fmt.Errorf("wsmux RoundTripperFor: authentication: %w", err)
	}
	return wrapped, up, nil
}
