package clustertest

import (
	"encoding/json"
	"fmt"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// serveDiscovery answers what kubectl asks before an exec or a
// port-forward: /api, /apis (legacy JSON, so client-go does not use
// aggregated discovery) and /api/v1 with the pods resources, and /version.
func serveDiscovery(w http.ResponseWriter, r *http.Request) bool {
	var v any
	switch r.URL.Path {
	case "/api":
		v = metav1.APIVersions{TypeMeta: metav1.TypeMeta{Kind: "APIVersions"}, Versions: []string{"v1"},
			ServerAddressByClientCIDRs: []metav1.ServerAddressByClientCIDR{{ClientCIDR: "0.0.0.0/0", ServerAddress: r.Host}}}
	case "/apis":
		v = metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}, Groups: []metav1.APIGroup{}}
	case "/api/v1":
		verbs := metav1.Verbs{"get", "list"}
		v = metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList"}, GroupVersion: "v1",
			APIResources: []metav1.APIResource{
				{Name: "pods", SingularName: "pod", Namespaced: true, Kind: "Pod", Verbs: verbs, ShortNames: []string{"po"}},
				{Name: "pods/exec", Namespaced: true, Kind: "PodExecOptions", Verbs: metav1.Verbs{"create", "get"}},
				{Name: "pods/attach", Namespaced: true, Kind: "PodAttachOptions", Verbs: metav1.Verbs{"create", "get"}},
				{Name: "pods/portforward", Namespaced: true, Kind: "PodPortForwardOptions", Verbs: metav1.Verbs{"create", "get"}},
			}}
	case "/version":
		v = map[string]string{"major": "1", "minor": "37", "gitVersion": "v1.37.2-wsmux-standin", "platform": "linux/amd64"}
	default:
		return false
	}
	writeJSON(w, http.StatusOK, v)
	return true
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

// servePod answers a pod GET: every name is a running pod with one
// container, "app", listening on 8080.
func servePod(w http.ResponseWriter, ns, name string) {
	writeJSON(w, http.StatusOK, &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + name)},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "standin",
			Ports: []corev1.ContainerPort{{ContainerPort: 8080, Protocol: corev1.ProtocolTCP}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	})
}

func notFound(w http.ResponseWriter, path string) {
	writeJSON(w, http.StatusNotFound, map[string]any{"kind": "Status", "apiVersion": "v1", "metadata": map[string]any{},
		"status": "Failure", "reason": "NotFound", "code": 404, "message": fmt.Sprintf("the server could not find the requested resource (%s)", path)})
}
