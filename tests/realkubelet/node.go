package main

// The node description: the machine (CPUs, NUMA nodes, memory, hugepages, devices) and the
// kubelet configuration the managers are built from, as tests/support/realkubelet.py writes it.
// From it come cAdvisor's MachineInfo (what the kubelet's managers read), the node allocatable
// reservation, and the sysfs tree the exporter reads, so both sides see one machine.

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	kubeletconfig "k8s.io/kubernetes/pkg/kubelet/apis/config"
	"k8s.io/utils/cpuset"
)

type cpuDescription struct {
	ID int `json:"id"`
	// core_id as sysfs shows it: the threads of one physical core share (socket, die, core)
	Core   int `json:"core"`
	Socket int `json:"socket"`
	NUMA   int `json:"numa"`
	// die_id (0 when not given)
	Die int `json:"die,omitempty"`
	// the id of the L3 cache the CPU sits under (cache/index3/id); nil: no cache information
	L3 *int `json:"l3,omitempty"`
}

type numaDescription struct {
	ID int `json:"id"`
	// MemTotal of the node in bytes, hugepages included (as the kernel counts it)
	Memory uint64 `json:"memory"`
	// page size in bytes (decimal string) -> number of pages
	Hugepages map[string]uint64 `json:"hugepages"`
	Distances []uint64          `json:"distances"`
}

type memoryReservation struct {
	NUMA  int    `json:"numa"`
	Type  string `json:"type"`
	Bytes int64  `json:"bytes"`
}

type deviceDescription struct {
	Resource string `json:"resource"`
	ID       string `json:"id"`
	// nil: the plugin reports no topology; []: a topology naming no NUMA node
	NUMA    []int64 `json:"numa"`
	Healthy bool    `json:"healthy"`
	// the resource's plugin keeps the stub's own Allocate, which answers no container
	PluginDefaultAllocate bool `json:"plugin_default_allocate,omitempty"`
}

type kubeletConfig struct {
	TopologyManagerPolicy        string            `json:"topology_manager_policy"`
	TopologyManagerScope         string            `json:"topology_manager_scope"`
	TopologyManagerPolicyOptions map[string]string `json:"topology_manager_policy_options"`
	CPUManagerPolicy             string            `json:"cpu_manager_policy"`
	CPUManagerPolicyOptions      map[string]string `json:"cpu_manager_policy_options"`
	// the CPU manager's reconcile period (a Go duration); "" keeps it out of the way (1h)
	CPUManagerReconcilePeriod string          `json:"cpu_manager_reconcile_period"`
	MemoryManagerPolicy       string          `json:"memory_manager_policy"`
	FeatureGates              map[string]bool `json:"feature_gates"`
	MaxPods                   int             `json:"max_pods"`
	mergeSettings                             // mergepolicy.go: when the merge is counted, reduced, checked
	reservationConfig                         // config.go: systemReserved, kubeReserved, evictionHard
}

type nodeDescription struct {
	Name           string              `json:"name"`
	CPUs           []cpuDescription    `json:"cpus"`
	NUMANodes      []numaDescription   `json:"numa_nodes"`
	ReservedCPUs   []int               `json:"reserved_cpus"`
	ReservedMemory []memoryReservation `json:"reserved_memory"`
	Devices        []deviceDescription `json:"devices"`
	Kubelet        kubeletConfig       `json:"kubelet"`
}

func (d *nodeDescription) check() error {
	if len(d.CPUs) == 0 {
		return fmt.Errorf("node description: no CPUs")
	}
	known := map[int]bool{}
	for _, numa := range d.NUMANodes {
		known[numa.ID] = true
	}
	for _, cpu := range d.CPUs {
		if !known[cpu.NUMA] {
			return fmt.Errorf("node description: CPU %d on unknown NUMA node %d", cpu.ID, cpu.NUMA)
		}
	}
	for _, r := range d.ReservedMemory {
		// the reservation the memory manager must match is systemReserved + kubeReserved +
		// the eviction threshold, none of which takes hugepages (server.go parseResourceList:
		// "cannot reserve"): a kubelet with reserved hugepages does not start
		if r.Type != "memory" {
			return fmt.Errorf("node description: cannot reserve %q resource", r.Type)
		}
	}
	if d.Name == "" {
		d.Name = "node"
	}
	if d.Kubelet.TopologyManagerPolicy == "" {
		d.Kubelet.TopologyManagerPolicy = "none"
	}
	if d.Kubelet.TopologyManagerScope == "" {
		d.Kubelet.TopologyManagerScope = "container"
	}
	if d.Kubelet.CPUManagerPolicy == "" {
		d.Kubelet.CPUManagerPolicy = "none"
	}
	if d.Kubelet.MemoryManagerPolicy == "" {
		d.Kubelet.MemoryManagerPolicy = "None"
	}
	if d.Kubelet.MaxPods == 0 {
		d.Kubelet.MaxPods = 110
	}
	if d.Kubelet.configured() {
		if _, err := d.kubeletReservation(); err != nil {
			return fmt.Errorf("node description: %w", err)
		}
	}
	return nil
}

func (d *nodeDescription) reconcilePeriod() (time.Duration, error) {
	if d.Kubelet.CPUManagerReconcilePeriod == "" {
		return time.Hour, nil
	}
	return time.ParseDuration(d.Kubelet.CPUManagerReconcilePeriod)
}

func (d *nodeDescription) reservedCPUSet() cpuset.CPUSet {
	return cpuset.New(d.ReservedCPUs...)
}

func hugepageResource(pageBytes uint64) v1.ResourceName {
	return v1.ResourceName("hugepages-" + resource.NewQuantity(int64(pageBytes), resource.BinarySI).String())
}

// allocatableReservation is what the kubelet's GetNodeAllocatableReservation returns for this
// node: with systemReserved, kubeReserved or evictionHard given, config.go's; else the reserved
// CPUs (reservedSystemCPUs) and the reserved memory per type, which the memory manager
// requires to equal the sum of its per-NUMA reservedMemory.
func (d *nodeDescription) allocatableReservation() v1.ResourceList {
	if d.Kubelet.configured() { // config.go; check() has refused a description it cannot read
		reservation, _ := d.kubeletReservation()
		return reservation
	}
	reservation := v1.ResourceList{}
	if n := len(d.ReservedCPUs); n > 0 {
		reservation[v1.ResourceCPU] = *resource.NewQuantity(int64(n), resource.DecimalSI)
	}
	for _, r := range d.ReservedMemory {
		name := v1.ResourceName(r.Type)
		total := reservation[name]
		total.Add(*resource.NewQuantity(r.Bytes, resource.BinarySI))
		reservation[name] = total
	}
	return reservation
}

// writeSysfs writes what the exporter and cAdvisor read: devices/system/node/nodeN/{cpulist,
// cpuM links,distance,meminfo,hugepages/...}, devices/system/{node,cpu}/online and each CPU's
// topology and L3 cache (layout.go).
func (d *nodeDescription) writeSysfs(root string) error {
	nodeRoot := filepath.Join(root, "devices", "system", "node")
	cpuRoot := filepath.Join(root, "devices", "system", "cpu")
	files := map[string]string{}
	links, err := d.writeCPUTopology(cpuRoot, nodeRoot, files)
	if err != nil {
		return err
	}
	var numaIDs []int
	for _, numa := range d.NUMANodes {
		numaIDs = append(numaIDs, numa.ID)
	}
	files[filepath.Join(nodeRoot, "online")] = cpuset.New(numaIDs...).String()
	for _, numa := range d.NUMANodes {
		dir := filepath.Join(nodeRoot, fmt.Sprintf("node%d", numa.ID))
		files[filepath.Join(dir, "cpulist")] = d.cpusOfNUMA(numa.ID).String()
		var distances []string
		for _, distance := range numa.Distances {
			distances = append(distances, strconv.FormatUint(distance, 10))
		}
		files[filepath.Join(dir, "distance")] = strings.Join(distances, " ")
		totalKB := numa.Memory / 1024
		files[filepath.Join(dir, "meminfo")] = fmt.Sprintf(
			"Node %d MemTotal:       %d kB\nNode %d MemFree:        %d kB\nNode %d HugePages_Total:     0",
			numa.ID, totalKB, numa.ID, totalKB/2, numa.ID)
		for _, size := range sortedKeys(numa.Hugepages) {
			pageBytes, err := strconv.ParseUint(size, 10, 64)
			if err != nil {
				return fmt.Errorf("NUMA node %d: bad hugepage size %q", numa.ID, size)
			}
			pages := filepath.Join(dir, "hugepages", fmt.Sprintf("hugepages-%dkB", pageBytes/1024))
			files[filepath.Join(pages, "nr_hugepages")] = strconv.FormatUint(numa.Hugepages[size], 10)
			files[filepath.Join(pages, "free_hugepages")] = strconv.FormatUint(numa.Hugepages[size], 10)
		}
	}
	for path, text := range files {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, []byte(text+"\n"), 0o644); err != nil {
			return err
		}
	}
	for link, target := range links {
		if err := os.Symlink(target, link); err != nil {
			return err
		}
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// memoryReservations is the kubelet configuration's reservedMemory: one entry per NUMA node.
func memoryReservations(reserved []memoryReservation) []kubeletconfig.MemoryReservation {
	byNUMA := map[int32]v1.ResourceList{}
	var order []int32
	for _, r := range reserved {
		numa := int32(r.NUMA)
		if _, seen := byNUMA[numa]; !seen {
			byNUMA[numa] = v1.ResourceList{}
			order = append(order, numa)
		}
		byNUMA[numa][v1.ResourceName(r.Type)] = *resource.NewQuantity(r.Bytes, resource.BinarySI)
	}
	var out []kubeletconfig.MemoryReservation
	for _, numa := range order {
		out = append(out, kubeletconfig.MemoryReservation{NumaNode: numa, Limits: byNUMA[numa]})
	}
	return out
}
