package main

// What the control interface reports: each container's share as the managers hold it, and the
// managers' whole state (dump), read through their own state readers.

import (
	"sort"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/kubelet/cm/devicemanager"
)

type memoryBlock struct {
	Type string `json:"type"`
	Size uint64 `json:"size"`
	NUMA []int  `json:"numa"`
}

type containerResult struct {
	Name string `json:"name"`
	// "init", "sidecar" (a restartable init container) or "app"
	Kind    string              `json:"kind"`
	CPUs    []int               `json:"cpus"`
	Memory  []memoryBlock       `json:"memory"`
	Devices map[string][]string `json:"devices"`
	// the Topology Manager's affinity for the container: nil when it has none
	NUMA      []int `json:"numa"`
	Preferred bool  `json:"preferred"`
}

func containerKinds(pod *v1.Pod) []struct {
	container *v1.Container
	kind      string
} {
	var out []struct {
		container *v1.Container
		kind      string
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		kind := "init"
		if c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
			kind = "sidecar"
		}
		out = append(out, struct {
			container *v1.Container
			kind      string
		}{c, kind})
	}
	for i := range pod.Spec.Containers {
		out = append(out, struct {
			container *v1.Container
			kind      string
		}{&pod.Spec.Containers[i], "app"})
	}
	return out
}

func (n *node) containerResults(pod *v1.Pod) []containerResult {
	uid := string(pod.UID)
	var results []containerResult
	for _, entry := range containerKinds(pod) {
		name := entry.container.Name
		result := containerResult{Name: name, Kind: entry.kind, CPUs: []int{}, Memory: []memoryBlock{},
			Devices: devicesOf(n.devices.GetDevices(uid, name))}
		if set, ok := n.cpus.State().GetCPUSet(uid, name); ok {
			result.CPUs = set.List()
		}
		for _, block := range n.memory.State().GetMemoryBlocks(uid, name) {
			result.Memory = append(result.Memory, memoryBlock{string(block.Type), block.Size, block.NUMAAffinity})
		}
		hint := affinity(n.ctx, n.topology, uid, name)
		if hint.NUMANodeAffinity != nil {
			result.NUMA = hint.NUMANodeAffinity.GetBits()
		}
		result.Preferred = hint.Preferred
		results = append(results, result)
	}
	return results
}

func devicesOf(instances devicemanager.ResourceDeviceInstances) map[string][]string {
	out := map[string][]string{}
	for resource, devices := range instances {
		for id := range devices {
			out[resource] = append(out[resource], id)
		}
		sort.Strings(out[resource])
	}
	return out
}

type memoryTable struct {
	Total          uint64 `json:"total"`
	SystemReserved uint64 `json:"system_reserved"`
	Allocatable    uint64 `json:"allocatable"`
	Reserved       uint64 `json:"reserved"`
	Free           uint64 `json:"free"`
}

type numaMemoryState struct {
	Assignments int                    `json:"assignments"`
	Cells       []int                  `json:"cells"`
	Memory      map[string]memoryTable `json:"memory"`
}

type deviceState struct {
	NUMA    []int64 `json:"numa"`
	Healthy bool    `json:"healthy"`
}

type podDump struct {
	Namespace  string            `json:"namespace"`
	Name       string            `json:"name"`
	UID        string            `json:"uid"`
	Phase      string            `json:"phase"`
	Reason     string            `json:"reason"`
	Message    string            `json:"message"`
	InManager  bool              `json:"in_pod_manager"`
	Active     bool              `json:"active"`
	Started    []string          `json:"started"`
	Finished   []string          `json:"finished"`
	Containers []containerResult `json:"containers"`
}

type dump struct {
	Version string `json:"kubernetes_version"`
	CPU     struct {
		Policy      string                      `json:"policy"`
		Allocatable []int                       `json:"allocatable"`
		DefaultSet  []int                       `json:"default_cpu_set"`
		Assignments map[string]map[string][]int `json:"assignments"`
	} `json:"cpu_manager"`
	Memory struct {
		Policy       string                              `json:"policy"`
		MachineState map[int]numaMemoryState             `json:"machine_state"`
		Assignments  map[string]map[string][]memoryBlock `json:"assignments"`
	} `json:"memory_manager"`
	Devices struct {
		Capacity    map[string]int64                  `json:"capacity"`
		Allocatable map[string]int64                  `json:"allocatable"`
		Registered  map[string]map[string]deviceState `json:"registered"`
	} `json:"device_manager"`
	Node struct {
		Capacity    map[string]string `json:"capacity"`
		Allocatable map[string]string `json:"allocatable"`
	} `json:"node"`
	Pods []podDump `json:"pods"`
}

func (n *node) dump() (*dump, error) {
	d := &dump{Version: kubernetesVersion}
	d.CPU.Policy = n.desc.Kubelet.CPUManagerPolicy
	d.CPU.Allocatable = n.cpus.GetAllocatableCPUs().List()
	state := n.cpus.State()
	d.CPU.DefaultSet = state.GetDefaultCPUSet().List()
	d.CPU.Assignments = map[string]map[string][]int{}
	for pod, containers := range state.GetCPUAssignments() {
		d.CPU.Assignments[pod] = map[string][]int{}
		for container, set := range containers {
			d.CPU.Assignments[pod][container] = cpuSetOf(set)
		}
	}
	d.Memory.Policy = n.desc.Kubelet.MemoryManagerPolicy
	d.Memory.MachineState = map[int]numaMemoryState{}
	for numa, s := range n.memory.State().GetMachineState() {
		entry := numaMemoryState{Assignments: s.NumberOfAssignments, Cells: s.Cells, Memory: map[string]memoryTable{}}
		for kind, table := range s.MemoryMap {
			entry.Memory[string(kind)] = memoryTable{table.TotalMemSize, table.SystemReserved, table.Allocatable, table.Reserved, table.Free}
		}
		d.Memory.MachineState[numa] = entry
	}
	d.Memory.Assignments = map[string]map[string][]memoryBlock{}
	for pod, containers := range n.memory.State().GetMemoryAssignments() {
		d.Memory.Assignments[pod] = map[string][]memoryBlock{}
		for container, blocks := range containers {
			for _, b := range blocks {
				d.Memory.Assignments[pod][container] = append(d.Memory.Assignments[pod][container],
					memoryBlock{string(b.Type), b.Size, b.NUMAAffinity})
			}
		}
	}
	logger := klog.FromContext(n.ctx)
	capacity, allocatable, _ := deviceCapacity(n.ctx, n.devices)
	d.Devices.Capacity, d.Devices.Allocatable = map[string]int64{}, map[string]int64{}
	for name, q := range capacity {
		d.Devices.Capacity[string(name)] = q.Value()
	}
	for name, q := range allocatable {
		d.Devices.Allocatable[string(name)] = q.Value()
	}
	d.Devices.Registered = map[string]map[string]deviceState{}
	healthy := map[string]map[string]bool{}
	for resource, devices := range allocatableDevices(n.ctx, n.devices) {
		healthy[resource] = map[string]bool{}
		for id := range devices {
			healthy[resource][id] = true
		}
	}
	for _, plugin := range append(n.plugins, n.stopped...) { // stopped: not registered again yet
		d.Devices.Registered[plugin.resource] = map[string]deviceState{}
		for _, dev := range plugin.current() {
			entry := deviceState{Healthy: healthy[plugin.resource][dev.ID]}
			if dev.Topology != nil {
				entry.NUMA = []int64{}
				for _, numa := range dev.Topology.Nodes {
					entry.NUMA = append(entry.NUMA, numa.ID)
				}
			}
			d.Devices.Registered[plugin.resource][dev.ID] = entry
		}
	}
	_ = logger
	node, err := n.nodeObject()
	if err != nil {
		return nil, err
	}
	d.Node.Capacity, d.Node.Allocatable = map[string]string{}, map[string]string{}
	for name, q := range node.Status.Capacity {
		d.Node.Capacity[string(name)] = q.String()
	}
	for name, q := range node.Status.Allocatable {
		d.Node.Allocatable[string(name)] = q.String()
	}
	n.mu.Lock()
	seen := append([]*v1.Pod(nil), n.admitted...)
	n.mu.Unlock()
	for _, pod := range seen {
		entry := podDump{Namespace: pod.Namespace, Name: pod.Name, UID: string(pod.UID), Started: []string{}, Finished: []string{}}
		current, inManager := n.pods.GetPodByUID(pod.UID)
		entry.InManager = inManager && current == pod
		entry.Active = entry.InManager && !n.isPodInactive(pod)
		if s := n.status(pod.UID); s != nil {
			n.mu.Lock()
			entry.Phase, entry.Reason, entry.Message = string(s.phase), s.reason, s.message
			for name, cs := range s.containers {
				entry.Started = append(entry.Started, name)
				if cs.finished {
					entry.Finished = append(entry.Finished, name)
				}
			}
			n.mu.Unlock()
			sort.Strings(entry.Started)
			sort.Strings(entry.Finished)
		}
		entry.Containers = n.containerResults(pod)
		d.Pods = append(d.Pods, entry)
	}
	return d, nil
}

// apiObjects is what the API server holds for this node, as the kubelet keeps it there: the
// Node with the status the node status setters compute (capacity, allocatable, the kubelet's
// version), and every pod of the pod manager with
// the status the status manager syncs (a rejected pod: phase Failed, reason and message), in
// admission order.
func (n *node) apiObjects() (*v1.Node, []v1.Pod, error) {
	node, err := n.nodeObject()
	if err != nil {
		return nil, nil, err
	}
	// nodestatus.VersionInfo: the kubelet's own version
	node.Status.NodeInfo.KubeletVersion = "v" + kubernetesVersion
	n.mu.Lock()
	seen := append([]*v1.Pod(nil), n.admitted...)
	n.mu.Unlock()
	pods := []v1.Pod{}
	for _, pod := range seen {
		if current, ok := n.pods.GetPodByUID(pod.UID); !ok || current != pod {
			continue
		}
		object := *pod.DeepCopy()
		if status, ok := n.GetPodStatus(pod.UID); ok {
			object.Status = status
		}
		pods = append(pods, object)
	}
	return node, pods, nil
}
