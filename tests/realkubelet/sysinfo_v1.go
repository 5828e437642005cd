//go:build k134 || k135 || k136

package main

// cAdvisor's sysfs reader as Kubernetes 1.34 to 1.36 vendor it (github.com/google/cadvisor;
// 1.37 imports github.com/google/cadvisor/lib, sysinfo_lib.go).

import (
	"github.com/google/cadvisor/utils/sysfs"
	"github.com/google/cadvisor/utils/sysinfo"
)

type (
	cadvisorSysFs     = sysfs.SysFs
	cadvisorCacheInfo = sysfs.CacheInfo
)

var (
	newRealSysFs        = sysfs.NewRealSysFs
	cadvisorGetNodeInfo = sysinfo.GetNodesInfo
)
