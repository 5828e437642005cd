package main

// A kubelet restart on the same root directory: the process goes away (its podresources and
// Pods API sockets, the device manager's registration socket), comes back, builds its managers
// again from their checkpoints as cm.NewContainerManager and Start do (the CPU manager's
// state.NewCheckpointState over cpu_manager_state, the memory manager's over
// memory_manager_state, the device manager's readCheckpoint of
// device-plugins/kubelet_internal_checkpoint), with the containers the runtime still has;
// the device plugins register again; and the config sources deliver the node's pods again,
// which HandlePodAdditions admits in creation order, before the sources count as seen
// (kubelet.go syncLoopIteration calls sourcesReady.AddSource after the handler).

import (
	"context"
	"fmt"
	"sort"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
	"k8s.io/kubernetes/pkg/kubelet/cm/containermap"
	"k8s.io/kubernetes/pkg/kubelet/util/sliceutils"
)

// replayingPods is true while a restarted kubelet admits the pods its sources delivered
// first: its sources are not all seen yet, so sourcesReady.AllReady is false. The managers
// then skip removeStaleState (CPU and memory managers) and UpdateAllocatedDevices, and the
// device manager lets a container the runtime reports running keep its devices without
// asking the plugin (devicemanager/manager.go devicesToAllocate, "kubelet restart").
var replayingPods atomic.Bool

// restart is the kubelet started again. pluginsLate: the device plugins register only at the
// next `plugins` op (a plugin that has not noticed the new kubelet socket yet, or a node
// reboot), so the pods delivered meanwhile are admitted without them.
func (n *node) restart(pluginsLate bool) error {
	if len(n.stopped) > 0 {
		return fmt.Errorf("restart: the device plugins of the last restart have not registered yet")
	}
	for _, s := range n.services {
		s.stop() // their sockets go away with the process
	}
	n.services = nil
	n.statusNotifier = nil
	n.stopped, n.plugins = n.plugins, nil
	for _, p := range n.stopped {
		p.stop()
	}
	stopDeviceManager(n.ctx, n.devices)
	n.cancel()
	n.ctx, n.cancel = context.WithCancel(context.Background())

	containers, running := n.runtimeContainers()
	pods := n.redelivered()
	replayingPods.Store(true)
	defer replayingPods.Store(false)
	if err := n.buildManagers(containers, running); err != nil {
		return fmt.Errorf("restart: %w", err)
	}
	if !pluginsLate {
		if err := n.registerPlugins(); err != nil {
			return err
		}
	}
	n.readmit(pods)
	replayingPods.Store(false) // sourcesReady.AddSource: every source seen
	return n.startServices()
}

// registerPlugins starts the device plugins again with the devices each last reported, and
// registers them with the device manager, as a device plugin does when it sees the kubelet's
// socket created again (the stub's Watch; the device manager's registration server removed
// the old plugin sockets when it started: CleanupPluginDirectory).
func (n *node) registerPlugins() error {
	if err := n.startPlugins(); err != nil {
		return fmt.Errorf("device plugins: %w", err)
	}
	n.stopped = nil
	return nil
}

// pluginDevicesNow is what the plugin for resource sends first: the devices it last reported
// before a restart, else those of the node description.
func (n *node) pluginDevicesNow(resource string, desc []deviceDescription) []*pluginapi.Device {
	for _, p := range n.stopped {
		if p.resource == resource {
			return p.current()
		}
	}
	return pluginDevices(desc)
}

// runtimeContainers is what cm.Start learns from the runtime (helpers.go
// buildContainerMapAndRunningSetFromRuntime): every container of the pods still on the node,
// exited ones included, and which of them run. A pod that ended has no running container.
func (n *node) runtimeContainers() (containermap.ContainerMap, sets.Set[string]) {
	containers := containermap.NewContainerMap()
	running := sets.New[string]()
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, pod := range n.pods.GetPods() {
		s := n.statuses[pod.UID]
		if s == nil {
			continue
		}
		ended := s.phase == v1.PodSucceeded || s.phase == v1.PodFailed
		for name, c := range s.containers {
			containers.Add(string(pod.UID), name, c.id)
			if !c.finished && !ended {
				running.Insert(c.id)
			}
		}
	}
	return containers, running
}

// redelivered is the node's pods as the API server hands them to the restarted kubelet: every
// pod of the pod manager (a pod deleted is gone), with the phase, reason and message the
// status manager synced (a rejected pod Failed), in creation order
// (HandlePodAdditions: sort.Sort(sliceutils.PodsByCreationTime)). The termination a pod
// worker had started is forgotten with the process.
func (n *node) redelivered() []*v1.Pod {
	pods := n.pods.GetPods()
	n.mu.Lock()
	for _, pod := range pods {
		if s := n.statuses[pod.UID]; s != nil {
			pod.Status.Phase, pod.Status.Reason, pod.Status.Message = s.phase, s.reason, s.message
			s.terminationRequested = false
		}
	}
	n.mu.Unlock()
	// the pod manager's order is a map's: admission order first, so that pods created within
	// the same instant keep it
	order := map[*v1.Pod]int{}
	for i, pod := range n.admitted {
		order[pod] = i
	}
	sort.SliceStable(pods, func(i, j int) bool { return order[pods[i]] < order[pods[j]] })
	sort.Sort(sliceutils.PodsByCreationTime(pods))
	return pods
}

// readmit is HandlePodAdditions for the delivered pods: each goes into the pod manager, and
// one whose phase is not terminal through the allocation manager's admit handlers with the
// active pods; a pod refused now is rejected as rejectPod rejects it.
func (n *node) readmit(pods []*v1.Pod) {
	for _, pod := range pods {
		n.pods.AddPod(pod)
		if podutil.IsPodPhaseTerminal(pod.Status.Phase) {
			continue
		}
		if ok, reason, message := addPod(n.ctx, n.allocations, n.activePods(), pod); !ok {
			n.mu.Lock()
			s := n.statuses[pod.UID]
			if s == nil {
				s = &podStatus{containers: map[string]*containerState{}}
				n.statuses[pod.UID] = s
			}
			s.phase, s.reason, s.message = v1.PodFailed, reason, "Pod was rejected: "+message
			n.mu.Unlock()
		}
	}
}

// registerLatePlugins registers the device plugins a restart left unregistered (restart
// pluginsLate): the `plugins` op.
func (n *node) registerLatePlugins() error {
	if len(n.stopped) == 0 {
		return fmt.Errorf("plugins: no device plugin is waiting to register")
	}
	return n.registerPlugins()
}
