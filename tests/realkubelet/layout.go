package main

// The CPU layout in sysfs as the kernel shows it: each CPU's topology directory (core_id,
// physical_package_id, die_id and the sibling lists), its L3 cache (cache/index3: id, level,
// type, size, shared_cpu_map/list) and its link under its NUMA node's directory (cAdvisor
// finds a node's CPUs by those links; the exporter reads cpulist).

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"k8s.io/utils/cpuset"
)

// l3SizeKB is what every L3 says of its size (cAdvisor reads it; nothing decides by it)
const l3SizeKB = 32768

func (d *nodeDescription) cpusOfNUMA(numa int) cpuset.CPUSet {
	var ids []int
	for _, cpu := range d.CPUs {
		if cpu.NUMA == numa {
			ids = append(ids, cpu.ID)
		}
	}
	return cpuset.New(ids...)
}

// writeCPUTopology adds each CPU's files to files and returns the links to make (link path ->
// target): nodeN/cpuM -> ../../cpu/cpuM.
func (d *nodeDescription) writeCPUTopology(cpuRoot, nodeRoot string, files map[string]string) (map[string]string, error) {
	type coreKey struct{ socket, die, core int }
	threads := map[coreKey][]int{}
	packages := map[int][]int{}
	dies := map[[2]int][]int{}
	caches := map[int][]int{}
	var all []int
	for _, cpu := range d.CPUs {
		all = append(all, cpu.ID)
		key := coreKey{cpu.Socket, cpu.Die, cpu.Core}
		threads[key] = append(threads[key], cpu.ID)
		packages[cpu.Socket] = append(packages[cpu.Socket], cpu.ID)
		dies[[2]int{cpu.Socket, cpu.Die}] = append(dies[[2]int{cpu.Socket, cpu.Die}], cpu.ID)
		if cpu.L3 != nil {
			caches[*cpu.L3] = append(caches[*cpu.L3], cpu.ID)
		}
	}
	online := cpuset.New(all...)
	files[filepath.Join(cpuRoot, "online")] = online.String()
	files[filepath.Join(cpuRoot, "possible")] = online.String()
	width := (online.List()[online.Size()-1] + 32) / 32 // 32-bit words in a CPU mask
	links := map[string]string{}
	for _, cpu := range d.CPUs {
		dir := filepath.Join(cpuRoot, fmt.Sprintf("cpu%d", cpu.ID))
		topology := filepath.Join(dir, "topology")
		core := cpuset.New(threads[coreKey{cpu.Socket, cpu.Die, cpu.Core}]...).String()
		files[filepath.Join(topology, "thread_siblings_list")] = core
		files[filepath.Join(topology, "core_cpus_list")] = core
		files[filepath.Join(topology, "core_id")] = strconv.Itoa(cpu.Core)
		files[filepath.Join(topology, "physical_package_id")] = strconv.Itoa(cpu.Socket)
		files[filepath.Join(topology, "die_id")] = strconv.Itoa(cpu.Die)
		files[filepath.Join(topology, "die_cpus_list")] = cpuset.New(dies[[2]int{cpu.Socket, cpu.Die}]...).String()
		files[filepath.Join(topology, "core_siblings_list")] = cpuset.New(packages[cpu.Socket]...).String()
		files[filepath.Join(topology, "package_cpus_list")] = cpuset.New(packages[cpu.Socket]...).String()
		if cpu.L3 != nil {
			shared := cpuset.New(caches[*cpu.L3]...)
			cache := filepath.Join(dir, "cache", "index3")
			files[filepath.Join(cache, "id")] = strconv.Itoa(*cpu.L3)
			files[filepath.Join(cache, "level")] = "3"
			files[filepath.Join(cache, "type")] = "Unified"
			files[filepath.Join(cache, "size")] = fmt.Sprintf("%dK", l3SizeKB)
			files[filepath.Join(cache, "shared_cpu_list")] = shared.String()
			files[filepath.Join(cache, "shared_cpu_map")] = cpuMask(shared, width)
		}
		links[filepath.Join(nodeRoot, fmt.Sprintf("node%d", cpu.NUMA), fmt.Sprintf("cpu%d", cpu.ID))] =
			filepath.Join("..", "..", "cpu", fmt.Sprintf("cpu%d", cpu.ID))
	}
	return links, nil
}

// cpuMask is the kernel's bitmap format: comma-separated 32-bit words in hex, the highest
// first ("00000000,0000ffff").
func cpuMask(cpus cpuset.CPUSet, words int) string {
	bits := make([]uint32, words)
	for _, cpu := range cpus.List() {
		bits[cpu/32] |= 1 << (cpu % 32)
	}
	parts := make([]string, words)
	for i := range bits {
		parts[words-1-i] = fmt.Sprintf("%08x", bits[i])
	}
	return strings.Join(parts, ",")
}
