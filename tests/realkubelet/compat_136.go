//go:build k136

package main

// What Kubernetes 1.36 does differently from 1.35 (compat_135_136.go has what they share).

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kubernetes/pkg/kubelet/allocation"
)

const kubernetesVersion = "1.36.3"

// newAllocationManager: the kubelet's allocation manager holds the admit handlers (kubelet.go
// NewMainKubelet); this one keeps its allocations in memory.
func newAllocationManager(ctx context.Context, activePods func() []*v1.Pod, getPodByUID func(types.UID) (*v1.Pod, bool)) allocation.Manager {
	return allocation.NewInMemoryManager(nil, func(*v1.Pod) {}, activePods, getPodByUID, sourcesReady{}, nil)
}
