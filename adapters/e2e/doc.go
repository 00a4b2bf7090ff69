// Package e2e holds the adapters' end-to-end tests: real client-go
// (tools/remotecommand, tools/portforward) on one end and the real kubelet
// streaming handlers of k8s.io/cri-streaming on the other, all in-process on
// loopback, over SPDY (the baseline) and over wsmux.
//
// It has no code outside its tests and must not be imported.
package e2e
