package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/wsmux/wsmux/gateway"
	"github.com/wsmux/wsmux/gateway/auth"
	"github.com/wsmux/wsmux/gateway/sharedstate"
)

// fleetFlags are the gateway's flags for running as one replica of a
// fleet sharing its state in Redis (docs/load-balancers.md).
type fleetFlags struct {
	url        string
	ca         string
	timeout    time.Duration
	replica    string
	listen     string
	advertise  string
	secretFile string
	// Set by validate.
	tlsCfg *tls.Config
	secret []byte
}

func (f *fleetFlags) register(c *cobra.Command) {
	fl := c.Flags()
	fl.StringVar(&f.url, "shared-state", "", "redis://[:PASSWORD@]HOST:PORT[/DB] (rediss:// for TLS): share used tickets, per-caller limits and the resume directory with the gateway's other replicas (docs/load-balancers.md); default: this process's memory (one replica)")
	fl.StringVar(&f.ca, "shared-state-ca", "", "PEM CA bundle that signed the rediss:// server's certificate (default: the system's roots)")
	fl.DurationVar(&f.timeout, "shared-state-timeout", sharedstate.DefaultTimeout, "longest one call to --shared-state may take; past it tickets are refused (503) and limits count on this replica only")
	fl.StringVar(&f.replica, "replica-name", "", "this replica's name in the fleet, unique (default: host name and pid; in Kubernetes the pod name)")
	fl.StringVar(&f.listen, "fleet-listen", "", "HOST:PORT on which this replica accepts the resumes the other replicas forward to it (plain HTTP, authenticated with --fleet-secret-file; keep it on the cluster's network)")
	fl.StringVar(&f.advertise, "advertise-address", "", "HOST:PORT at which the other replicas reach --fleet-listen (default: --fleet-listen when it names a host; in Kubernetes the pod IP)")
	fl.StringVar(&f.secretFile, "fleet-secret-file", "", "file holding the fleet's secret (at least 32 bytes, the same on every replica: head -c 32 /dev/urandom | base64 > fleet.secret), which authenticates forwarded resumes")
}

// fleetSetup is what start opened: the store, the fleet listener, and the
// gateway's FleetConfig.
type fleetSetup struct {
	store sharedstate.Store
	ln    net.Listener
	cfg   *gateway.FleetConfig
	srv   *http.Server
}

// validate checks the flags and reads the secret, before anything is
// opened; resume: the gateway offers resumption (forwarding needs the
// fleet listener and the secret).
func (f *fleetFlags) validate(resume bool) error {
	if f.url == "" {
		for name, set := range map[string]bool{"--shared-state-ca": f.ca != "", "--replica-name": f.replica != "",
			"--fleet-listen": f.listen != "", "--advertise-address": f.advertise != "", "--fleet-secret-file": f.secretFile != ""} {
			if set {
				return usageErrorf("%s needs --shared-state (redis://...): it configures a replica of a fleet", name)
			}
		}
		return nil
	}
	if u, err := url.Parse(f.url); err != nil || (u.Scheme != "redis" && u.Scheme != "rediss") || u.Host == "" {
		return usageErrorf("--shared-state %s: want redis://[:PASSWORD@]HOST:PORT[/DB], or rediss:// for TLS", redacted(f.url))
	}
	if f.timeout <= 0 {
		return usageErrorf("--shared-state-timeout %s: want a positive duration, for example 500ms", f.timeout)
	}
	if f.ca != "" {
		if f.tlsCfg == nil {
			pool, err := auth.LoadCertPool(f.ca)
			if err != nil {
				return usageErrorf("--shared-state-ca: %v", err)
			}
			f.tlsCfg = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		}
	}
	if !resume {
		return nil
	}
	if f.listen == "" || f.secretFile == "" {
		return usageErrorf("--shared-state with resumption (--resume-timeout) needs --fleet-listen and --fleet-secret-file: a resume that reaches another replica is forwarded to the one holding the session (or pass --resume-timeout 0)")
	}
	b, err := os.ReadFile(f.secretFile)
	if err != nil {
		return usageErrorf("--fleet-secret-file: %v", err)
	}
	f.secret = bytes.TrimSpace(b)
	if len(f.secret) < gateway.MinFleetSecret {
		return usageErrorf("--fleet-secret-file %s: %d bytes, want at least %d: head -c 32 /dev/urandom | base64 > %s", f.secretFile, len(f.secret), gateway.MinFleetSecret, f.secretFile)
	}
	if err := checkListen("--fleet-listen", f.listen); err != nil {
		return err
	}
	if f.advertise == "" {
		host, _, _ := net.SplitHostPort(f.listen)
		if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
			return usageErrorf("--fleet-listen %s listens on every address: pass --advertise-address HOST:PORT, the address the other replicas reach it at (in Kubernetes: $(POD_IP):PORT)", f.listen)
		}
	} else if _, _, err := net.SplitHostPort(f.advertise); err != nil {
		return usageErrorf("--advertise-address %q: want HOST:PORT", f.advertise)
	}
	return nil
}

// start connects the store and listens on --fleet-listen (validate
// passed); nil without --shared-state.
func (f *fleetFlags) start(a *app) (*fleetSetup, error) {
	if f.url == "" {
		return nil, nil
	}
	store, err := sharedstate.NewRedis(sharedstate.RedisConfig{URL: f.url, TLS: f.tlsCfg, Timeout: f.timeout})
	if err != nil {
		return nil, usageErrorf("--shared-state: %v", err)
	}
	s := &fleetSetup{store: store, cfg: &gateway.FleetConfig{Store: store, Replica: f.replica, Secret: f.secret}}
	if err := store.Ping(context.Background()); err != nil {
		// Not fatal: the replica serves, falling back as documented, and
		// the store is tried again at every call.
		a.log.Error("gateway: the fleet's shared state does not answer yet: tickets are refused until it does", "shared_state", redacted(f.url), "error", err)
	}
	if f.listen == "" {
		return s, nil
	}
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		_ = store.Close()
		return nil, fmt.Errorf("--fleet-listen %s: %w: pick another address or stop what uses it", f.listen, err)
	}
	s.ln = ln
	s.cfg.Advertise = f.advertise
	if s.cfg.Advertise == "" {
		s.cfg.Advertise = ln.Addr().String() // a named host; port 0 resolved
	}
	return s, nil
}

// serve serves g's forwarded resumes on the fleet listener.
func (s *fleetSetup) serve(a *app, g *gateway.Gateway) {
	if s.ln == nil {
		return
	}
	s.srv = &http.Server{Handler: g.FleetHandler(), ReadHeaderTimeout: 10 * time.Second}
	a.log.Info("gateway: accepting forwarded resumes from the fleet", "fleet_listen", s.ln.Addr().String(), "advertise", s.cfg.Advertise, "replica", g.Replica())
	go func() {
		if err := s.srv.Serve(s.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.log.Error("gateway: the fleet listener failed; resumes forwarded here fail", "error", err)
		}
	}()
}

// close stops the fleet listener (the sessions it started are the
// gateway's to drain) and the store's connections.
func (s *fleetSetup) close() {
	if s.srv != nil {
		_ = s.srv.Close()
	} else if s.ln != nil {
		_ = s.ln.Close()
	}
	_ = s.store.Close()
}

// redacted hides the password of a store URL in logs.
func redacted(u string) string {
	if p, err := url.Parse(u); err == nil {
		return p.Redacted()
	}
	return "(unparseable)"
}
