package main

// The node's topology as the kubelet gets it: cAdvisor's own sysfs reader
// (utils/sysinfo GetNodesInfo, what cAdvisor's machine info and so cm.NewContainerManager get)
// run over the sysfs tree written for the node, so the managers see what cAdvisor reads from
// the files the exporter reads — core grouping, sockets, L3 (uncore) caches, NUMA nodes
// without CPUs — not a second description of the same machine.

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"k8s.io/utils/cpuset"
)

// rootedSysFs is cAdvisor's real sysfs reader with the paths it fixes under /sys moved under
// root (the tree's /sys): the NUMA node glob, the CPU directory, the online CPU list and each
// CPU's cache directory. The paths cAdvisor is handed (a node's or a CPU's directory) are
// already under root and go to the real reader unchanged.
type rootedSysFs struct {
	cadvisorSysFs
	root string
}

// the directories under /sys cAdvisor's reader names itself
const cpuDirUnderSys = "devices/system/cpu"

func (fs rootedSysFs) GetNodesPaths() ([]string, error) {
	return filepath.Glob(filepath.Join(fs.root, "devices/system/node/node*[0-9]"))
}

func (fs rootedSysFs) GetCPUsPaths(cpusPath string) ([]string, error) {
	if cpusPath == "/sys/"+cpuDirUnderSys { // a machine without NUMA nodes: every CPU
		cpusPath = filepath.Join(fs.root, cpuDirUnderSys)
	}
	return fs.cadvisorSysFs.GetCPUsPaths(cpusPath)
}

func (fs rootedSysFs) GetCaches(id int) ([]os.FileInfo, error) {
	entries, err := os.ReadDir(filepath.Join(fs.root, cpuDirUnderSys, "cpu"+strconv.Itoa(id), "cache"))
	if err != nil {
		return nil, err
	}
	infos := make([]os.FileInfo, 0, len(entries))
	for _, entry := range entries {
		info, err := entry.Info()
		if err != nil {
			return nil, err
		}
		infos = append(infos, info)
	}
	return infos, nil
}

// GetCacheInfo reads the cache with cAdvisor's own parser (id, size, level, type and the
// number of CPUs in shared_cpu_map): it joins its fixed /sys/devices/system/cpu/cpu<N>/cache
// and the name with path.Join, which cleans ".." lexically, so a name climbing out of those
// six directories names the tree's file.
func (fs rootedSysFs) GetCacheInfo(cpu int, name string) (cadvisorCacheInfo, error) {
	target := filepath.Join(fs.root, cpuDirUnderSys, "cpu"+strconv.Itoa(cpu), "cache", name)
	return fs.cadvisorSysFs.GetCacheInfo(cpu, strings.Repeat("../", 6)+strings.TrimPrefix(target, "/"))
}

// IsCPUOnline is cAdvisor's check against the tree's cpu/online (every CPU when it is missing).
func (fs rootedSysFs) IsCPUOnline(cpuPath string) bool {
	text, err := os.ReadFile(filepath.Join(fs.root, cpuDirUnderSys, "online"))
	if os.IsNotExist(err) {
		return true
	}
	if err != nil {
		return false
	}
	online, err := cpuset.Parse(strings.TrimSpace(string(text)))
	if err != nil {
		return false
	}
	id, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(cpuPath), "cpu"))
	return err == nil && online.Contains(id)
}

// readTopology is cAdvisor's NUMA nodes of the tree under root (a node's cores with their
// threads, socket and uncore caches; its memory, hugepages and distances) and the number of
// logical CPUs it found.
func readTopology(root string) ([]cadvisorNode, int, error) {
	return cadvisorGetNodeInfo(rootedSysFs{cadvisorSysFs: newRealSysFs(), root: root})
}
