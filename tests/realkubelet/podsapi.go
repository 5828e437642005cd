//go:build !k134 && !k135 && !k136

package main

// The kubelet's local Pods API (KEP-4188; pkg/kubelet/apis/pods, 1.36 alpha, 1.37 beta), the
// kubelet's own server over this node's pod manager, served as server.go
// ListenAndServePodsServer serves it: a gRPC server of its own with its own rate limiter on
// the unary calls (100 QPS, burst 10) and the server's metrics interceptors, on
// <dir>/pods-api/pods-api.sock. Its status provider is the node's status cache (GetPodStatus),
// which holds a rejected pod as rejectPod leaves it in the status manager; the status cache's
// changes reach WatchPods as the status manager's notifications do (statusNotifier). 1.34
// has no Pods API: this file is left out of that build.

import (
	"os"
	"path/filepath"

	"golang.org/x/time/rate"
	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/klog/v2"
	podsv1alpha1 "k8s.io/kubelet/pkg/apis/pods/v1alpha1"
	"k8s.io/kubernetes/pkg/features"
	apisgrpc "k8s.io/kubernetes/pkg/kubelet/apis/grpc"
	"k8s.io/kubernetes/pkg/kubelet/apis/pods"
)

func init() { serviceStarters = append(serviceStarters, startPodsAPI) }

// PodsAPISocket is getPodsAPIDir() + pods.Socket + ".sock" (kubelet.go ListenAndServePods).
func (n *node) PodsAPISocket() string {
	return filepath.Join(n.socketDir("pods-api"), pods.Socket+".sock")
}

func startPodsAPI(n *node) (service, error) {
	if !utilfeature.DefaultFeatureGate.Enabled(features.PodsAPI) {
		return service{}, nil // kubelet.go ListenAndServePods: nothing without the gate
	}
	if err := os.MkdirAll(n.socketDir("pods-api"), 0o750); err != nil {
		return service{}, err
	}
	podsServer := pods.NewPodsServer(pods.NewBroadcaster(n.ctx), n.pods, n, sourcesReady{})
	logger := klog.Background()
	// status_manager.go sendNotification: OnPodUpdated for each accepted status (added when
	// the status manager had none), OnPodRemoved when the pod finished (TerminatePod)
	n.statusNotifier = func(pod *v1.Pod, status v1.PodStatus, isAdded, finished bool) {
		podCopy := *pod
		podCopy.Status = status
		if finished {
			podsServer.OnPodRemoved(logger, &podCopy)
		} else {
			podsServer.OnPodUpdated(logger, &podCopy, status, isAdded)
		}
	}
	server := grpc.NewServer(
		grpc.ChainUnaryInterceptor(
			apisgrpc.LimiterUnaryServerInterceptor(rate.NewLimiter(rate.Limit(pods.DefaultQPS),
				int(pods.DefaultBurstTokens))),
			pods.MetricsUnaryServerInterceptor,
		),
		grpc.StreamInterceptor(pods.MetricsStreamServerInterceptor),
	)
	podsv1alpha1.RegisterPodsServer(server, podsServer)
	s := service{Name: "pods_api", Socket: n.PodsAPISocket(), server: server}
	return s, serveUnix(server, s.Socket)
}
