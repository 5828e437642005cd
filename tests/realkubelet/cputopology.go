package main

// The CPU manager's view of the machine (cpumanager/topology.Discover over the node's cAdvisor
// machine info): per CPU the core (the lowest thread id of cAdvisor's core), socket, NUMA node
// and uncore cache the CPU manager picks by, and the counts it derives its rules from. The
// tests compare it with what the exporter reads from the same sysfs tree.

import (
	"fmt"

	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/kubelet/cm/cpumanager/topology"
)

type cpuInfo struct {
	Core   int `json:"core"`
	Socket int `json:"socket"`
	NUMA   int `json:"numa"`
	Uncore int `json:"uncore"`
}

type cpuTopologyView struct {
	NumCPUs        int             `json:"num_cpus"`
	NumCores       int             `json:"num_cores"`
	NumSockets     int             `json:"num_sockets"`
	NumNUMANodes   int             `json:"num_numa_nodes"`
	NumUncoreCache int             `json:"num_uncore_caches"`
	CPUs           map[int]cpuInfo `json:"cpus"`
	// the NUMA nodes of cAdvisor's machine info, CPU-less ones included (the Topology
	// Manager's and the memory manager's NUMA nodes)
	NUMANodes []int `json:"numa_nodes"`
}

// discover calls topology.Discover as the release spells it (a logger first since 1.35).
func discover(machine *machineInfo) (*topology.CPUTopology, error) {
	var call any = topology.Discover
	switch f := call.(type) {
	case func(*machineInfo) (*topology.CPUTopology, error):
		return f(machine)
	case func(klog.Logger, *machineInfo) (*topology.CPUTopology, error):
		return f(klog.Background(), machine)
	}
	return nil, fmt.Errorf("topology.Discover has a signature this component does not know")
}

func (n *node) cpuTopology() (*cpuTopologyView, error) {
	topo, err := discover(n.machine)
	if err != nil {
		return nil, err
	}
	view := &cpuTopologyView{NumCPUs: topo.NumCPUs, NumCores: topo.NumCores, NumSockets: topo.NumSockets,
		NumNUMANodes: topo.NumNUMANodes, NumUncoreCache: topo.NumUncoreCache, CPUs: map[int]cpuInfo{}}
	for cpu, info := range topo.CPUDetails {
		view.CPUs[cpu] = cpuInfo{info.CoreID, info.SocketID, info.NUMANodeID, info.UncoreCacheID}
	}
	for _, node := range n.machine.Topology {
		view.NUMANodes = append(view.NUMANodes, node.Id)
	}
	return view, nil
}
