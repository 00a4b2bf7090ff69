package gateway

import (
	"fmt"
	"path"
	"slices"
	"strings"
	"sync/atomic"

	"sigs.k8s.io/yaml"

	"github.com/wsmux/wsmux/controller"
)

// Policy is the gateway's own authorization, checked before anything goes
// upstream (for clusters where the gateway talks to kubelets directly, or
// as a second fence in front of the cluster's RBAC). A request for a
// streaming subresource is allowed when a rule matches it.
//
//	rules:
//	- users: [alice]            # and/or groups: [dev]; "*": anyone
//	  namespaces: [shop]        # omitted or "*": any
//	  pods: ["web-*"]           # glob patterns (path.Match); omitted: any
//	  subresources: [exec, portforward]  # omitted: exec, attach, portforward
//	  containers: [app]         # omitted: any (port-forward names none)
type Policy struct {
	Rules []PolicyRule `json:"rules"`
}

// PolicyRule is one rule of a Policy.
type PolicyRule struct {
	Users        []string `json:"users,omitempty"`
	Groups       []string `json:"groups,omitempty"`
	Namespaces   []string `json:"namespaces,omitempty"`
	Pods         []string `json:"pods,omitempty"`
	Subresources []string `json:"subresources,omitempty"`
	Containers   []string `json:"containers,omitempty"`
}

// ParsePolicy parses a policy file (YAML or JSON); unknown fields are
// errors, so a typo does not silently allow more.
func ParsePolicy(b []byte) (*Policy, error) {
	var p Policy
	if err := yaml.UnmarshalStrict(b, &p); err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	for i, r := range p.Rules {
		if len(r.Users) == 0 && len(r.Groups) == 0 {
			return nil, fmt.Errorf("policy: rule %d names no users or groups (use users: [\"*\"] for anyone)", i+1)
		}
		for _, s := range r.Subresources {
			if s != "exec" && s != "attach" && s != "portforward" {
				return nil, fmt.Errorf("policy: rule %d: subresource %q: want exec, attach or portforward", i+1, s)
			}
		}
		for _, g := range append(append([]string(nil), r.Pods...), r.Containers...) {
			if _, err := path.Match(g, ""); err != nil {
				return nil, fmt.Errorf("policy: rule %d: pattern %q: %v", i+1, g, err)
			}
		}
	}
	return &p, nil
}

func anyMatch(patterns []string, v string) bool {
	if len(patterns) == 0 {
		return true
	}
	for _, p := range patterns {
		if ok, _ := path.Match(p, v); ok || p == "*" {
			return true
		}
	}
	return false
}

// Allows reports whether u may open t with the given container (""
// for port-forward or when the request names none), and if not, why.
func (p *Policy) Allows(u controller.User, t controller.Target, container string) (bool, string) {
	for _, r := range p.Rules {
		subject := slices.Contains(r.Users, "*") || slices.Contains(r.Groups, "*") || slices.Contains(r.Users, u.Name)
		for _, g := range u.Groups {
			subject = subject || slices.Contains(r.Groups, g)
		}
		if !subject || !anyMatch(r.Namespaces, t.Namespace) || !anyMatch(r.Pods, t.Pod) ||
			!anyMatch(r.Subresources, t.Subresource) {
			continue
		}
		if len(r.Containers) > 0 && (container == "" && t.Subresource != "portforward" || container != "" && !anyMatch(r.Containers, container)) {
			continue
		}
		return true, ""
	}
	name := u.Name
	if name == "" {
		name = u.ID
	}
	what := "pods/" + t.Subresource
	if container != "" {
		what += " (container " + container + ")"
	}
	return false, fmt.Sprintf("the gateway's policy does not allow user %q (groups %s) %s of pod %q in namespace %q",
		name, "["+strings.Join(u.Groups, ",")+"]", what, t.Pod, t.Namespace)
}

// PolicyStore holds the current Policy; Set replaces it atomically.
type PolicyStore struct{ p atomic.Pointer[Policy] }

// Set installs p.
func (s *PolicyStore) Set(p *Policy) { s.p.Store(p) }

// Get returns the current policy (nil: none).
func (s *PolicyStore) Get() *Policy { return s.p.Load() }
