//go:build !k134

package main

// countingPolicy's Merge as the Policy interface has it since 1.35 (with a logger);
// mergepolicy.go has the rest.

import (
	_ "unsafe" // go:linkname

	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager"
)

//go:linkname filterProvidersHints k8s.io/kubernetes/pkg/kubelet/cm/topologymanager.filterProvidersHints
func filterProvidersHints(logger klog.Logger, providersHints []map[string][]topologymanager.TopologyHint) [][]topologymanager.TopologyHint

func (p *countingPolicy) Merge(logger klog.Logger, providersHints []map[string][]topologymanager.TopologyHint) (topologymanager.TopologyHint, bool) {
	return p.merge(filterProvidersHints(logger, providersHints), func() (topologymanager.TopologyHint, bool) {
		return p.inner.Merge(logger, providersHints)
	})
}

func newPolicyOptions(options map[string]string) (topologymanager.PolicyOptions, error) {
	return topologymanager.NewPolicyOptions(klog.Background(), options)
}

func policyMerge(p topologymanager.Policy, providers []map[string][]topologymanager.TopologyHint) (topologymanager.TopologyHint, bool) {
	return p.Merge(klog.Background(), providers)
}

func filteredLists(providers []map[string][]topologymanager.TopologyHint) [][]topologymanager.TopologyHint {
	return filterProvidersHints(klog.Background(), providers)
}
