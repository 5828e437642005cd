package main

// cAdvisor's MachineInfo for the node description: what the kubelet's managers are built from
// (cm.NewContainerManager reads it once). The cAdvisor types come from compat_*.go, as their
// import path differs between releases.

import (
	"fmt"
	"sort"
	"strconv"

	v1 "k8s.io/api/core/v1"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/component-base/featuregate"
	"k8s.io/utils/cpuset"
)

func buildMachineInfo(d *nodeDescription) *machineInfo {
	info := &machineInfo{MachineID: d.Name, SystemUUID: d.Name, BootID: d.Name}
	cores := map[[2]int]bool{}
	sockets := map[int]bool{}
	totalPages := map[uint64]uint64{}
	for _, numa := range d.NUMANodes {
		node := cadvisorNode{Id: numa.ID, Memory: numa.Memory, Distances: numa.Distances}
		info.MemoryCapacity += numa.Memory
		for _, size := range sortedKeys(numa.Hugepages) {
			pageBytes, _ := strconv.ParseUint(size, 10, 64)
			node.HugePages = append(node.HugePages, cadvisorHugePages{PageSize: pageBytes / 1024, NumPages: numa.Hugepages[size]})
			totalPages[pageBytes/1024] += numa.Hugepages[size]
		}
		threads := map[[2]int][]int{}
		var order [][2]int
		for _, cpu := range d.CPUs {
			if cpu.NUMA != numa.ID {
				continue
			}
			key := [2]int{cpu.Socket, cpu.Core}
			if _, seen := threads[key]; !seen {
				order = append(order, key)
			}
			threads[key] = append(threads[key], cpu.ID)
			cores[key] = true
			sockets[cpu.Socket] = true
		}
		sort.Slice(order, func(i, j int) bool {
			return cpuset.New(threads[order[i]]...).List()[0] < cpuset.New(threads[order[j]]...).List()[0]
		})
		for _, key := range order {
			node.Cores = append(node.Cores, cadvisorCore{Id: key[1], Threads: cpuset.New(threads[key]...).List(), SocketID: key[0]})
		}
		info.Topology = append(info.Topology, node)
	}
	for _, size := range sortedUints(totalPages) {
		info.HugePages = append(info.HugePages, cadvisorHugePages{PageSize: size, NumPages: totalPages[size]})
	}
	info.NumCores = len(d.CPUs)
	info.NumPhysicalCores = len(cores)
	info.NumSockets = len(sockets)
	return info
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
