package main

// cAdvisor's MachineInfo for the node description: what the kubelet's managers are built from
// (cm.NewContainerManager reads it once). The cAdvisor types come from compat_*.go, as their
// import path differs between releases.

import (
	"fmt"
	"sort"

	v1 "k8s.io/api/core/v1"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/component-base/featuregate"
	"k8s.io/utils/cpuset"
)

// buildMachineInfo is cAdvisor's MachineInfo of the node: its topology read by cAdvisor's own
// sysfs reader from the tree under sysfsRoot (cadvisor.go), the totals summed from it as
// cAdvisor's machine info sums them (sockets: the distinct physical package ids of the online
// CPUs, what /proc/cpuinfo's "physical id" lines give).
func buildMachineInfo(d *nodeDescription, sysfsRoot string) (*machineInfo, error) {
	topology, numCPUs, err := readTopology(sysfsRoot)
	if err != nil {
		return nil, fmt.Errorf("cAdvisor's topology of %s: %w", sysfsRoot, err)
	}
	info := &machineInfo{MachineID: d.Name, SystemUUID: d.Name, BootID: d.Name, Topology: topology, NumCores: numCPUs}
	sockets := map[int]bool{}
	totalPages := map[uint64]uint64{}
	for _, node := range topology {
		info.MemoryCapacity += node.Memory
		for _, pages := range node.HugePages {
			totalPages[pages.PageSize] += pages.NumPages
		}
		for _, core := range node.Cores {
			sockets[core.SocketID] = true
			info.NumPhysicalCores++
		}
	}
	for _, size := range sortedUints(totalPages) {
		info.HugePages = append(info.HugePages, cadvisorHugePages{PageSize: size, NumPages: totalPages[size]})
	}
	info.NumSockets = len(sockets)
	return info, nil
}

func sortedUints(m map[uint64]uint64) []uint64 {
	keys := make([]uint64, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	return keys
}

func v1ResourceName(name string) v1.ResourceName { return v1.ResourceName(name) }

// gateDefaults: each feature gate a reset has set, with its release default, so that the next
// reset starts from the defaults again (the gates are process-wide).
var gateDefaults = map[string]bool{}

func setFeatureGates(gates map[string]bool) error {
	known := utilfeature.DefaultMutableFeatureGate.GetAll()
	for name := range gates {
		// the kubelet refuses a config naming a gate its release does not have (Enabled
		// would panic on it)
		if _, ok := known[featureName(name)]; !ok {
			return fmt.Errorf("unrecognized feature gate: %s (Kubernetes %s)", name, kubernetesVersion)
		}
	}
	for name := range gates {
		if _, known := gateDefaults[name]; !known {
			gateDefaults[name] = utilfeature.DefaultFeatureGate.Enabled(featureName(name))
		}
	}
	wanted := map[string]bool{}
	for name, value := range gateDefaults {
		wanted[name] = value
	}
	for name, value := range gates {
		wanted[name] = value
	}
	return utilfeature.DefaultMutableFeatureGate.SetFromMap(wanted)
}

func cpuSetOf(set cpuset.CPUSet) []int { return set.List() }

func featureName(name string) featuregate.Feature { return featuregate.Feature(name) }
