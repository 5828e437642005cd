//go:build k135

package main

// What Kubernetes 1.35 does differently from 1.36 (compat_135_136.go has what they share).

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kubernetes/pkg/kubelet/allocation"
	"k8s.io/kubernetes/pkg/kubelet/cm"
)

const kubernetesVersion = "1.35.4"

// newAllocationManager: the kubelet's allocation manager holds the admit handlers (kubelet.go
// NewMainKubelet); this one keeps its allocations in memory. The node configuration and
// allocatable it takes in 1.35 serve only in-place resizes.
func newAllocationManager(ctx context.Context, activePods func() []*v1.Pod, getPodByUID func(types.UID) (*v1.Pod, bool)) allocation.Manager {
	return allocation.NewInMemoryManager(cm.NodeConfig{}, v1.ResourceList{}, nil, func(*v1.Pod) {},
		activePods, getPodByUID, sourcesReady{}, nil)
}
