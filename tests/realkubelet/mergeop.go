package main

// The "merge" op: the Topology Manager's policy Merge (topologymanager/policy_*.go) on hint
// lists the caller gives, for any number of NUMA nodes, with no node: what the exporter's merge
// (exporter/fit) is checked against beyond the 8 NUMA nodes a kubelet admits with, and beyond
// the hint lists its own providers happen to give. The reduction (mergepolicy.go) answers too.

import (
	"fmt"
	"time"

	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager"
	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager/bitmask"
)

type hintDescription struct {
	NUMA      []int `json:"numa"` // null: any NUMA node
	Preferred bool  `json:"preferred"`
}

type mergeRequest struct {
	NUMANodes []int `json:"numa_nodes"`
	// distances[i] is NUMA node NUMANodes[i]'s row (prefer-closest-numa-nodes)
	Distances [][]uint64        `json:"distances"`
	Policy    string            `json:"policy"`
	Options   map[string]string `json:"options"`
	// one list per provider resource; null: the resource does not care, []: no hint
	Lists [][]*hintDescription `json:"lists"`
}

type mergeAnswer struct {
	NUMA         []int   `json:"numa"`
	Preferred    bool    `json:"preferred"`
	Admit        bool    `json:"admit"`
	Seconds      float64 `json:"seconds"`
	ReducedNUMA  []int   `json:"reduced_numa"`
	ReducedPref  bool    `json:"reduced_preferred"`
	ReducedAdmit bool    `json:"reduced_admit"`
	ReducedSecs  float64 `json:"reduced_seconds"`
	Permutations float64 `json:"permutations"`
}

func hintBits(h topologymanager.TopologyHint) []int {
	if h.NUMANodeAffinity == nil {
		return nil
	}
	return h.NUMANodeAffinity.GetBits()
}

// runMerge builds the policy as NewManager does (NewPolicyOptions, NewNUMAInfo, the policy's
// constructor) and merges the lists, given to it as one provider per list, each with one
// resource.
func runMerge(req *mergeRequest) (*mergeAnswer, error) {
	opts, err := newPolicyOptions(req.Options)
	if err != nil {
		return nil, err
	}
	var nodes []cadvisorNode
	for i, id := range req.NUMANodes {
		node := cadvisorNode{Id: id}
		if i < len(req.Distances) {
			node.Distances = req.Distances[i]
		}
		nodes = append(nodes, node)
	}
	numaInfo, err := topologymanager.NewNUMAInfo(nodes, opts)
	if err != nil {
		return nil, err
	}
	var policy topologymanager.Policy
	switch req.Policy {
	case topologymanager.PolicyBestEffort:
		policy = topologymanager.NewBestEffortPolicy(numaInfo, opts)
	case topologymanager.PolicyRestricted:
		policy = topologymanager.NewRestrictedPolicy(numaInfo, opts)
	case topologymanager.PolicySingleNumaNode:
		policy = topologymanager.NewSingleNumaNodePolicy(numaInfo, opts)
	default:
		return nil, fmt.Errorf("merge: unknown policy %q", req.Policy)
	}
	var providers []map[string][]topologymanager.TopologyHint
	for i, list := range req.Lists {
		var hints []topologymanager.TopologyHint
		if list != nil {
			hints = []topologymanager.TopologyHint{}
		}
		for _, h := range list {
			hint := topologymanager.TopologyHint{Preferred: h.Preferred}
			if h.NUMA != nil {
				if hint.NUMANodeAffinity, err = bitmask.NewBitMask(h.NUMA...); err != nil {
					return nil, err
				}
			}
			hints = append(hints, hint)
		}
		providers = append(providers, map[string][]topologymanager.TopologyHint{fmt.Sprintf("r%d", i): hints})
	}
	answer := &mergeAnswer{}
	started := time.Now()
	best, admit := policyMerge(policy, providers)
	answer.Seconds = time.Since(started).Seconds()
	answer.NUMA, answer.Preferred, answer.Admit = hintBits(best), best.Preferred, admit

	counting := &countingPolicy{inner: policy, numaInfo: numaInfo, opts: opts}
	lists := filteredLists(providers)
	single := req.Policy == topologymanager.PolicySingleNumaNode
	if single {
		lists = filterSingleNumaHints(lists)
	}
	answer.Permutations = 1
	for _, l := range lists {
		answer.Permutations *= float64(len(l))
	}
	started = time.Now()
	reduced, reducedAdmit := counting.reduced(lists, single)
	answer.ReducedSecs = time.Since(started).Seconds()
	answer.ReducedNUMA, answer.ReducedPref, answer.ReducedAdmit = hintBits(reduced), reduced.Preferred, reducedAdmit
	return answer, nil
}
