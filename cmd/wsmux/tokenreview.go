package main

import (
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/wsmux/wsmux/gateway/auth"
)

// reviewFlags configure the gateway's TokenReview webhook, named as
// kube-apiserver names its own.
type reviewFlags struct {
	config     string
	successTTL time.Duration
	failureTTL time.Duration
}

func (f *reviewFlags) register(c *cobra.Command) {
	fl := c.Flags()
	fl.StringVar(&f.config, "authentication-token-webhook-config-file", "", "kubeconfig of a TokenReview webhook that checks bearer tokens the --token-file does not hold (its server URL is POSTed to as is; for the cluster's own TokenReview API use https://APISERVER/apis/authentication.k8s.io/v1/tokenreviews)")
	fl.DurationVar(&f.successTTL, "authentication-token-webhook-cache-ttl", 2*time.Minute, "how long an authenticated token's review is cached")
	fl.DurationVar(&f.failureTTL, "authentication-token-webhook-failure-cache-ttl", 10*time.Second, "how long a rejected token's review is cached (a review that failed is never cached)")
}

func (f *reviewFlags) set() bool { return f.config != "" }

// apply makes authn send unknown bearer tokens to the webhook.
func (f *reviewFlags) apply(authn *auth.Credentials) error {
	if f.config == "" {
		return nil
	}
	if f.successTTL < 0 || f.failureTTL < 0 {
		return usageErrorf("--authentication-token-webhook-cache-ttl and --authentication-token-webhook-failure-cache-ttl: want 0 (no cache) or more")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", f.config)
	if err != nil {
		return usageErrorf("--authentication-token-webhook-config-file: %v", err)
	}
	r, err := auth.NewTokenReviewer(cfg, f.successTTL, f.failureTTL)
	if err != nil {
		return usageErrorf("--authentication-token-webhook-config-file %s: %v", f.config, err)
	}
	authn.UseTokenReview(r)
	return nil
}
