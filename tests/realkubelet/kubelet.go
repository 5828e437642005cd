package main

// One node's kubelet, as far as resource admission goes: the real Topology Manager, CPU,
// memory and device managers (with the kubelet's stub device plugins), the real pod manager and
// allocation manager with the kubelet's admit handlers in the kubelet's order, and the
// container lifecycle calls the kubelet makes. The fakes stand where a container runtime or
// cgroups would be needed: a pod status cache (what the status manager would hold), container
// ids, and a runtime that accepts every cpuset update.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/uuid"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
	k8sv1 "k8s.io/kubernetes/pkg/apis/core/v1"
	"k8s.io/kubernetes/pkg/kubelet/allocation"
	"k8s.io/kubernetes/pkg/kubelet/cm/containermap"
	"k8s.io/kubernetes/pkg/kubelet/cm/cpumanager"
	"k8s.io/kubernetes/pkg/kubelet/cm/devicemanager"
	"k8s.io/kubernetes/pkg/kubelet/cm/memorymanager"
	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager"
	kubepod "k8s.io/kubernetes/pkg/kubelet/pod"
)

// baseDir holds each node's directory ("": the system's temporary directory).
var baseDir string

// node is one reset's kubelet; every field is rebuilt by reset.
type node struct {
	desc    nodeDescription
	dir     string // state, sockets and sysfs of this node
	ctx     context.Context
	cancel  context.CancelFunc
	machine *machineInfo

	topology    topologymanager.Manager
	cpus        cpuManager
	memory      memorymanager.Manager
	devices     *devicemanager.ManagerImpl
	pods        kubepod.Manager
	allocations allocation.Manager
	plugins     []*devicePlugin
	stopped     []*devicePlugin // the plugins of the kubelet before a restart, until they register again
	services    []service
	merges      *countingPolicy // the Topology Manager's policy, counted (mergepolicy.go)

	mu       sync.Mutex
	statuses map[types.UID]*podStatus
	// told of every status the cache takes, as the status manager tells its notifiers
	// (podsapi.go: the Pods API's watchers); nil when nobody listens
	statusNotifier func(pod *v1.Pod, status v1.PodStatus, isAdded, finished bool)
	admitted       []*v1.Pod // every pod seen since reset, in admission order (dump, removed pods)
}

// cpuManager is the CPU manager's interface in both releases (an alias of cpumanager.Manager).
type cpuManager = cpumanager.Manager

// podStatus is what the kubelet's status manager and pod workers know of a pod.
type podStatus struct {
	phase                v1.PodPhase
	reason, message      string
	terminationRequested bool
	containers           map[string]*containerState // by container name
}

type containerState struct {
	id       string
	finished bool
}

func (n *node) socketDir(name string) string { return filepath.Join(n.dir, name) }

func (n *node) PodResourcesSocket() string {
	return filepath.Join(n.socketDir("pod-resources"), "kubelet.sock")
}

func (n *node) SysfsRoot() string { return filepath.Join(n.dir, "sys") }

// newNode builds the managers for desc and starts them as the kubelet's container manager does
// (container_manager_linux.go NewContainerManager and Start): Topology Manager first, then the
// device, CPU and memory managers as its hint providers, in that order.
func newNode(desc nodeDescription) (*node, error) {
	if err := desc.check(); err != nil {
		return nil, err
	}
	if err := setFeatureGates(desc.Kubelet.FeatureGates); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(baseDir, "rk-")
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := &node{desc: desc, dir: dir, ctx: ctx, cancel: cancel, statuses: map[types.UID]*podStatus{}}
	if err := n.build(); err != nil {
		n.close()
		return nil, err
	}
	return n, nil
}

func (n *node) build() error {
	for _, sub := range []string{"device-plugins", "pod-resources"} {
		if err := os.MkdirAll(n.socketDir(sub), 0o750); err != nil {
			return err
		}
	}
	if err := n.desc.writeSysfs(n.SysfsRoot()); err != nil {
		return err
	}
	var err error
	if n.machine, err = buildMachineInfo(&n.desc, n.SysfsRoot()); err != nil {
		return err
	}
	if err := n.buildManagers(containermap.NewContainerMap(), sets.New[string]()); err != nil {
		return err
	}
	if err := n.startPlugins(); err != nil {
		return err
	}
	return n.startServices()
}

// buildManagers builds the Topology Manager, the device, CPU and memory managers (each
// restoring its checkpoint under the root directory when there is one), the pod manager and
// the allocation manager with the admit handlers, and starts the managers with the
// containers the runtime has (containers) and those of them running (running): empty on a
// fresh node, what the runtime still runs on a restart (restart.go).
func (n *node) buildManagers(containers containermap.ContainerMap, running sets.Set[string]) error {
	period, err := n.desc.reconcilePeriod()
	if err != nil {
		return fmt.Errorf("cpu_manager_reconcile_period: %w", err)
	}
	kc := n.desc.Kubelet
	if n.topology, err = newTopologyManager(n.ctx, n.machine, kc); err != nil {
		return fmt.Errorf("topology manager: %w", err)
	}
	n.merges = wrapPolicy(n.topology, kc.MergeLimit, kc.MergeCheck)
	socket := filepath.Join(n.socketDir("device-plugins"), "kubelet.sock")
	if n.devices, err = newDeviceManager(n.ctx, socket, n.machine, n.topology); err != nil {
		return fmt.Errorf("device manager: %w", err)
	}
	addHintProvider(n.ctx, n.topology, n.devices)
	reservation := n.desc.allocatableReservation()
	stateDir := n.dir // the kubelet's root directory: cpu_manager_state, memory_manager_state
	n.cpus, err = newCPUManager(n.ctx, kc, period, n.machine, n.desc.reservedCPUSet(), reservation, stateDir, n.topology)
	if err != nil {
		return fmt.Errorf("cpu manager: %w", err)
	}
	addHintProvider(n.ctx, n.topology, n.cpus)
	n.memory, err = newMemoryManager(n.ctx, kc, n.machine, reservation, n.desc.ReservedMemory, stateDir, n.topology)
	if err != nil {
		return fmt.Errorf("memory manager: %w", err)
	}
	addHintProvider(n.ctx, n.topology, n.memory)

	n.pods = kubepod.NewBasicPodManager()
	n.allocations = newAllocationManager(n.ctx, n.activePods, n.pods.GetPodByUID)
	addAdmitHandlers(n)

	return startManagers(n, containers, running)
}

func (n *node) close() {
	for _, s := range n.services {
		s.stop()
	}
	for _, plugin := range n.plugins {
		plugin.stop()
	}
	if n.devices != nil {
		stopDeviceManager(n.ctx, n.devices)
	}
	n.cancel()
	_ = os.RemoveAll(n.dir)
}

// ---- what the kubelet's GetActivePods and isPodInactive decide (kubelet_pods.go) ----

func (n *node) status(uid types.UID) *podStatus {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.statuses[uid]
}

// isAdmittedPodTerminal: the pod's own phase, or the phase the kubelet set (a rejected pod).
func (n *node) isAdmittedPodTerminal(pod *v1.Pod) bool {
	if pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed {
		return true
	}
	if s := n.status(pod.UID); s != nil {
		return s.phase == v1.PodSucceeded || s.phase == v1.PodFailed
	}
	return false
}

// isPodInactive: terminal pods are inactive unless their termination is still in progress.
func (n *node) isPodInactive(pod *v1.Pod) bool {
	s := n.status(pod.UID)
	terminating := s != nil && s.terminationRequested
	return n.isAdmittedPodTerminal(pod) && !terminating
}

func (n *node) activePods() []*v1.Pod {
	var active []*v1.Pod
	for _, pod := range n.pods.GetPods() {
		if !n.isPodInactive(pod) {
			active = append(active, pod)
		}
	}
	return active
}

// GetPodStatus is the status manager's view, for the CPU manager's reconcile loop.
func (n *node) GetPodStatus(uid types.UID) (v1.PodStatus, bool) {
	pod, found := n.pods.GetPodByUID(uid)
	s := n.status(uid)
	if !found || s == nil {
		return v1.PodStatus{}, false
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	status := v1.PodStatus{Phase: s.phase, Reason: s.reason, Message: s.message}
	add := func(containers []v1.Container, into *[]v1.ContainerStatus) {
		for _, c := range containers {
			cs, ok := s.containers[c.Name]
			if !ok {
				continue
			}
			state := v1.ContainerState{Running: &v1.ContainerStateRunning{}}
			if cs.finished {
				state = v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 0}}
			}
			*into = append(*into, v1.ContainerStatus{Name: c.Name, ContainerID: "fake://" + cs.id, State: state})
		}
	}
	add(pod.Spec.InitContainers, &status.InitContainerStatuses)
	add(pod.Spec.Containers, &status.ContainerStatuses)
	return status, true
}

// notify tells the status notifier of the pod's status now (isAdded: the first one).
func (n *node) notify(pod *v1.Pod, isAdded, finished bool) {
	if n.statusNotifier == nil {
		return
	}
	if status, ok := n.GetPodStatus(pod.UID); ok {
		n.statusNotifier(pod, status, isAdded, finished)
	} else if finished {
		n.statusNotifier(pod, v1.PodStatus{}, false, true)
	}
}

// fakeRuntime accepts the CPU and memory managers' cpuset updates (no containers run here).
type fakeRuntime struct{}

func (fakeRuntime) UpdateContainerResources(context.Context, string, *runtimeapi.ContainerResources) error {
	return nil
}

type sourcesReady struct{}

func (sourcesReady) AddSource(string) {}
func (sourcesReady) AllReady() bool   { return !replayingPods.Load() } // restart.go

// ---- admission (kubelet.go HandlePodAdditions, rejectPod) ----

type admitResult struct {
	Admitted   bool              `json:"admitted"`
	Reason     string            `json:"reason"`
	Message    string            `json:"message"`
	UID        string            `json:"uid"`
	Containers []containerResult `json:"containers"`
	// how long the admit handlers took, and the Topology Manager's merges among them
	Seconds float64       `json:"seconds"`
	Merges  []mergeRecord `json:"merges"`
}

// admit adds the pod to the pod manager and runs the allocation manager's admit handlers, as
// HandlePodAdditions does; a rejected pod gets phase Failed, reason and "Pod was rejected: "
// message, as rejectPod sets them in the status manager.
func (n *node) admit(pod *v1.Pod) (*admitResult, error) {
	if pod.Name == "" {
		return nil, fmt.Errorf("admit: the pod has no metadata.name")
	}
	if pod.Namespace == "" {
		pod.Namespace = metav1.NamespaceDefault
	}
	if _, exists := n.pods.GetPodByName(pod.Namespace, pod.Name); exists {
		return nil, fmt.Errorf("admit: pod %s/%s exists", pod.Namespace, pod.Name)
	}
	k8sv1.SetObjectDefaults_Pod(pod) // what the API server does before the kubelet sees it
	if pod.UID == "" {
		pod.UID = uuid.NewUUID()
	}
	if pod.Spec.NodeName == "" {
		pod.Spec.NodeName = n.desc.Name
	}
	pod.CreationTimestamp = metav1.NewTime(time.Now())
	if pod.Status.Phase == "" {
		pod.Status.Phase = v1.PodPending
	}
	n.pods.AddPod(pod)
	n.mu.Lock()
	n.statuses[pod.UID] = &podStatus{phase: v1.PodPending, containers: map[string]*containerState{}}
	n.admitted = append(n.admitted, pod)
	n.mu.Unlock()
	result := &admitResult{Admitted: true, UID: string(pod.UID)}
	if !podutil.IsPodPhaseTerminal(pod.Status.Phase) {
		n.merges.takeRecords()
		started := time.Now()
		ok, reason, message := addPod(n.ctx, n.allocations, n.activePods(), pod)
		result.Seconds, result.Merges = time.Since(started).Seconds(), n.merges.takeRecords()
		if !ok {
			n.mu.Lock()
			n.statuses[pod.UID] = &podStatus{phase: v1.PodFailed, reason: reason,
				message: "Pod was rejected: " + message, containers: map[string]*containerState{}}
			n.mu.Unlock()
			result.Admitted, result.Reason, result.Message = false, reason, message
		}
	}
	n.notify(pod, true, false) // rejectPod's status, or the first sync's (Pending)
	result.Containers = n.containerResults(pod)
	return result, nil
}

// ---- the container lifecycle the kubelet drives (kuberuntime_container.go) ----

func (n *node) pod(namespace, name string) (*v1.Pod, error) {
	pod, ok := n.pods.GetPodByName(namespace, name)
	if !ok {
		return nil, fmt.Errorf("no pod %s/%s", namespace, name)
	}
	return pod, nil
}

func findContainer(pod *v1.Pod, name string) *v1.Container {
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == name {
			return &pod.Spec.InitContainers[i]
		}
	}
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return &pod.Spec.Containers[i]
		}
	}
	return nil
}

// start runs the named containers' start (all of them when names is empty: the init
// containers in order, each regular one finishing before the next starts, then the app
// containers), as the kubelet does: PreStartContainer calls the CPU, memory and Topology
// managers' AddContainer (internal_container_lifecycle.go); a regular init container that
// finishes gets PostStopContainer, which only the Topology Manager hears.
func (n *node) start(namespace, name string, names []string) error {
	pod, err := n.pod(namespace, name)
	if err != nil {
		return err
	}
	s := n.status(pod.UID)
	if s == nil || s.phase == v1.PodFailed || s.phase == v1.PodSucceeded {
		return fmt.Errorf("pod %s/%s was not admitted or has ended", namespace, name)
	}
	if len(names) == 0 {
		for _, c := range pod.Spec.InitContainers {
			if err := n.startContainer(pod, c.Name); err != nil {
				return err
			}
			if !podutil.IsRestartableInitContainer(&c) {
				if err := n.finish(pod, c.Name); err != nil {
					return err
				}
			}
		}
		for _, c := range pod.Spec.Containers {
			names = append(names, c.Name)
		}
	}
	for _, c := range names {
		if err := n.startContainer(pod, c); err != nil {
			return err
		}
	}
	n.mu.Lock()
	s.phase = v1.PodRunning
	n.mu.Unlock()
	n.notify(pod, false, false)
	return nil
}

func (n *node) startContainer(pod *v1.Pod, name string) error {
	container := findContainer(pod, name)
	if container == nil {
		return fmt.Errorf("pod %s/%s has no container %s", pod.Namespace, pod.Name, name)
	}
	id := fmt.Sprintf("%s-%s", pod.UID, name)
	n.mu.Lock()
	n.statuses[pod.UID].containers[name] = &containerState{id: id}
	n.mu.Unlock()
	preStartContainer(n.ctx, n.cpus, n.memory, n.topology, pod, container, id)
	return nil
}

func (n *node) finishByName(namespace, name, container string) error {
	pod, err := n.pod(namespace, name)
	if err != nil {
		return err
	}
	return n.finish(pod, container)
}

func (n *node) finish(pod *v1.Pod, name string) error {
	n.mu.Lock()
	s := n.statuses[pod.UID]
	cs := s.containers[name]
	if cs == nil {
		n.mu.Unlock()
		return fmt.Errorf("container %s of %s/%s was not started", name, pod.Namespace, pod.Name)
	}
	cs.finished = true
	id := cs.id
	n.mu.Unlock()
	return postStopContainer(n.ctx, n.topology, id)
}

// setPhase is what the pod workers and status manager report of a pod's end: Succeeded or
// Failed, or its termination requested (deleted, still being torn down: still active).
func (n *node) setPhase(namespace, name string, phase v1.PodPhase, terminating bool) error {
	pod, err := n.pod(namespace, name)
	if err != nil {
		return err
	}
	n.mu.Lock()
	s := n.statuses[pod.UID]
	if phase != "" {
		s.phase = phase
	}
	s.terminationRequested = terminating
	n.mu.Unlock()
	n.notify(pod, false, false)
	if phase == v1.PodSucceeded || phase == v1.PodFailed {
		n.notify(pod, false, !terminating) // TerminatePod: finished
	}
	return nil
}

// remove is the pod deleted from the API: its started containers stop (PostStopContainer), and
// it leaves the pod manager and the allocation manager (HandlePodRemoves). The CPU and memory
// managers give its resources back at their next removeStaleState (the next admission or the
// CPU manager's reconcile), the device manager at its next UpdateAllocatedDevices.
func (n *node) remove(namespace, name string) error {
	pod, err := n.pod(namespace, name)
	if err != nil {
		return err
	}
	n.mu.Lock()
	var ids []string
	if s := n.statuses[pod.UID]; s != nil {
		for _, cs := range s.containers {
			if !cs.finished {
				ids = append(ids, cs.id)
			}
		}
	}
	finished := n.statuses[pod.UID] != nil
	n.mu.Unlock()
	if finished {
		n.notify(pod, false, true) // killed and terminated: TerminatePod
	}
	n.mu.Lock()
	delete(n.statuses, pod.UID)
	n.mu.Unlock()
	for _, id := range ids {
		if err := postStopContainer(n.ctx, n.topology, id); err != nil {
			return err
		}
	}
	n.pods.RemovePod(pod)
	removeAllocation(n.ctx, n.allocations, pod.UID)
	return nil
}
