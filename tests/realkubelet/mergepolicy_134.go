//go:build k134

package main

// countingPolicy's Merge as 1.34's Policy interface has it (no logger); mergepolicy.go has the
// rest.

import (
	_ "unsafe" // go:linkname

	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager"
)

//go:linkname filterProvidersHints k8s.io/kubernetes/pkg/kubelet/cm/topologymanager.filterProvidersHints
func filterProvidersHints(providersHints []map[string][]topologymanager.TopologyHint) [][]topologymanager.TopologyHint

func (p *countingPolicy) Merge(providersHints []map[string][]topologymanager.TopologyHint) (topologymanager.TopologyHint, bool) {
	return p.merge(filterProvidersHints(providersHints), func() (topologymanager.TopologyHint, bool) {
		return p.inner.Merge(providersHints)
	})
}

func newPolicyOptions(options map[string]string) (topologymanager.PolicyOptions, error) {
	return topologymanager.NewPolicyOptions(options)
}

func policyMerge(p topologymanager.Policy, providers []map[string][]topologymanager.TopologyHint) (topologymanager.TopologyHint, bool) {
	return p.Merge(providers)
}

func filteredLists(providers []map[string][]topologymanager.TopologyHint) [][]topologymanager.TopologyHint {
	return filterProvidersHints(providers)
}
