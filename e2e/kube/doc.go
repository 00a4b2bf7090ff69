// Package kube runs unmodified kubectl through `wsmux gateway` against a
// real Kubernetes control plane: the kube-apiserver of k8s.io/kubernetes and
// an embedded etcd, started in the test's process, with a Node whose kubelet
// is the stand-in of internal/kubelet. A module of its own, so that neither
// the core, the adapters nor the gateway take k8s.io/kubernetes into their
// dependency graphs. Tests only: `make e2e-kube`.
package kube
