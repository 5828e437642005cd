//go:build !k134 && !k135 && !k136

package main

// cAdvisor's sysfs reader as Kubernetes 1.37 vendors it (github.com/google/cadvisor/lib; the
// releases before import github.com/google/cadvisor, sysinfo_v1.go).

import (
	"github.com/google/cadvisor/lib/utils/sysfs"
	"github.com/google/cadvisor/lib/utils/sysinfo"
)

type (
	cadvisorSysFs     = sysfs.SysFs
	cadvisorCacheInfo = sysfs.CacheInfo
)

var (
	newRealSysFs        = sysfs.NewRealSysFs
	cadvisorGetNodeInfo = sysinfo.GetNodesInfo
)
