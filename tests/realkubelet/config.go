package main

// The node allocatable reservation as a kubelet configured with systemReserved, kubeReserved
// and evictionHard computes it: cmd/kubelet/app/server.go (reservedSystemCPUs, when set,
// replaces both reservations' cpu by its CPU count) and cm/node_container_manager_linux.go
// GetNodeAllocatableReservation (for each resource of the capacity: systemReserved +
// kubeReserved + cm/helpers.go hardEvictionReservation, whose memory.available threshold is a
// quantity or a percentage of the memory capacity). The CPU manager reserves ceil(cpu) CPUs of
// it, the memory manager requires its reservedMemory of each type to add up to it, and the
// node status subtracts it from the capacity.

import (
	"fmt"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	evictionapi "k8s.io/kubernetes/pkg/kubelet/eviction/api"
)

// reservationConfig is the KubeletConfiguration's systemReserved, kubeReserved and
// evictionHard, as the node description's kubelet section gives them. When all three are
// absent the reservation is the older description's: the reserved CPUs' count and the reserved
// memory's sum (no eviction threshold).
type reservationConfig struct {
	SystemReserved map[string]string `json:"system_reserved,omitempty"`
	KubeReserved   map[string]string `json:"kube_reserved,omitempty"`
	// nil (left out of the configuration) is the kubelet's default, memory.available<100Mi;
	// {} sets no threshold
	EvictionHard map[string]string `json:"eviction_hard,omitempty"`
}

// defaultEvictionHard is the KubeletConfiguration default's memory part
// (apis/config/v1beta1/defaults_linux.go DefaultEvictionHard).
var defaultEvictionHard = map[string]string{"memory.available": "100Mi"}

func (c reservationConfig) configured() bool {
	return c.SystemReserved != nil || c.KubeReserved != nil || c.EvictionHard != nil
}

// kubeletReservation is GetNodeAllocatableReservation for this description.
func (d *nodeDescription) kubeletReservation() (v1.ResourceList, error) {
	kc := d.Kubelet.reservationConfig
	system, err := parseReserved("systemReserved", kc.SystemReserved)
	if err != nil {
		return nil, err
	}
	kube, err := parseReserved("kubeReserved", kc.KubeReserved)
	if err != nil {
		return nil, err
	}
	if n := len(d.ReservedCPUs); n > 0 { // server.go: --reserved-cpus overwrites the cpu setting
		delete(kube, v1.ResourceCPU)
		system[v1.ResourceCPU] = *resource.NewQuantity(int64(n), resource.DecimalSI)
	}
	eviction := kc.EvictionHard
	if eviction == nil {
		eviction = defaultEvictionHard
	}
	capacity := d.memoryCapacity()
	evicted, err := evictionMemory(eviction, capacity)
	if err != nil {
		return nil, err
	}
	result := v1.ResourceList{}
	// the capacity's resources (cadvisor.CapacityFromMachineInfo): cpu, memory, hugepages
	for _, name := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
		value := resource.NewQuantity(0, resource.DecimalSI)
		if q, ok := system[name]; ok {
			value.Add(q)
		}
		if q, ok := kube[name]; ok {
			value.Add(q)
		}
		if name == v1.ResourceMemory && evicted != nil {
			value.Add(*evicted)
		}
		if !value.IsZero() {
			result[name] = *value
		}
	}
	return result, nil
}

func parseReserved(field string, values map[string]string) (v1.ResourceList, error) {
	out := v1.ResourceList{}
	for name, text := range values {
		switch v1.ResourceName(name) {
		case v1.ResourceCPU, v1.ResourceMemory, v1.ResourceEphemeralStorage:
		default:
			// server.go parseResourceList
			return nil, fmt.Errorf("%s: cannot reserve %q resource", field, name)
		}
		q, err := resource.ParseQuantity(text)
		if err != nil {
			return nil, fmt.Errorf("%s.%s: %w", field, name, err)
		}
		if q.Sign() == -1 {
			return nil, fmt.Errorf("%s.%s: resource quantity for %q cannot be negative: %v", field, name, name, text)
		}
		out[v1.ResourceName(name)] = q
	}
	return out, nil
}

// evictionMemory is hardEvictionReservation's memory part: the memory.available threshold as a
// quantity, or a percentage (parsed as float32, as eviction/helpers.go parsePercentage does)
// of the memory capacity (evictionapi.GetThresholdQuantity).
func evictionMemory(thresholds map[string]string, capacity int64) (*resource.Quantity, error) {
	text, ok := thresholds["memory.available"]
	if !ok {
		return nil, nil
	}
	var value evictionapi.ThresholdValue
	if strings.HasSuffix(text, "%") {
		percent, err := strconv.ParseFloat(strings.TrimRight(text, "%"), 32)
		if err != nil || percent < 0 || percent > 100 {
			return nil, fmt.Errorf("evictionHard.memory.available: invalid percentage %q", text)
		}
		value.Percentage = float32(percent) / 100
	} else {
		q, err := resource.ParseQuantity(text)
		if err != nil {
			return nil, fmt.Errorf("evictionHard.memory.available: %w", err)
		}
		value.Quantity = &q
	}
	memory := *resource.NewQuantity(capacity, resource.BinarySI)
	return evictionapi.GetThresholdQuantity(value, &memory), nil
}

// memoryCapacity is the machine's MemoryCapacity (cAdvisor: every NUMA node's MemTotal,
// hugepages included).
func (d *nodeDescription) memoryCapacity() int64 {
	var total uint64
	for _, numa := range d.NUMANodes {
		total += numa.Memory
	}
	return int64(total)
}
