//go:build k135 || k136

package main

// The calls whose signatures changed between the releases, as Kubernetes 1.35 and 1.36 make
// them (compat_134.go has 1.34's, compat_137.go 1.37's; compat_135.go and compat_136.go the
// few that differ between these two). Each one is the call the kubelet itself makes, in the
// file named. Between 1.34 and 1.37 the managers took a logger one package at a time: in these
// two releases the CPU, memory and device managers' constructors and Start, the stub plugin and
// the container lifecycle calls of the CPU and memory managers take one; the Topology Manager,
// the allocation manager and the device manager's readers do not yet.

import (
	"context"
	"time"
	_ "unsafe" // go:linkname

	cadvisorapi "github.com/google/cadvisor/info/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
	"k8s.io/kubernetes/pkg/kubelet/allocation"
	"k8s.io/kubernetes/pkg/kubelet/cadvisor"
	"k8s.io/kubernetes/pkg/kubelet/cm/containermap"
	"k8s.io/kubernetes/pkg/kubelet/cm/cpumanager"
	"k8s.io/kubernetes/pkg/kubelet/cm/devicemanager"
	plugin "k8s.io/kubernetes/pkg/kubelet/cm/devicemanager/plugin/v1beta1"
	"k8s.io/kubernetes/pkg/kubelet/cm/memorymanager"
	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager"
	"k8s.io/kubernetes/pkg/kubelet/lifecycle"
	"k8s.io/kubernetes/pkg/kubelet/nodestatus"
	"k8s.io/utils/cpuset"
)

type (
	machineInfo       = cadvisorapi.MachineInfo
	cadvisorNode      = cadvisorapi.Node
	cadvisorCore      = cadvisorapi.Core
	cadvisorHugePages = cadvisorapi.HugePagesInfo
)

func newTopologyManager(ctx context.Context, machine *machineInfo, kc kubeletConfig) (topologymanager.Manager, error) {
	return topologymanager.NewManager(machine.Topology, kc.TopologyManagerPolicy,
		kc.TopologyManagerScope, kc.TopologyManagerPolicyOptions)
}

// newManagerImpl is the device manager's own constructor with a socket path of the caller's:
// the exported NewManagerImpl fixes /var/lib/kubelet/device-plugins/kubelet.sock.
//
//go:linkname newManagerImpl k8s.io/kubernetes/pkg/kubelet/cm/devicemanager.newManagerImpl
func newManagerImpl(logger klog.Logger, socketPath string, topology []cadvisorapi.Node, topologyAffinityStore topologymanager.Store) (*devicemanager.ManagerImpl, error)

func newDeviceManager(ctx context.Context, socket string, machine *machineInfo, tm topologymanager.Manager) (*devicemanager.ManagerImpl, error) {
	return newManagerImpl(klog.FromContext(ctx), socket, machine.Topology, tm)
}

func addHintProvider(ctx context.Context, tm topologymanager.Manager, provider topologymanager.HintProvider) {
	tm.AddHintProvider(klog.FromContext(ctx), provider)
}

func newCPUManager(ctx context.Context, kc kubeletConfig, period time.Duration, machine *machineInfo,
	reserved cpuset.CPUSet, reservation v1.ResourceList, stateDir string, tm topologymanager.Manager) (cpumanager.Manager, error) {
	return cpumanager.NewManager(klog.FromContext(ctx), kc.CPUManagerPolicy, kc.CPUManagerPolicyOptions,
		period, machine, reserved, reservation, stateDir, tm)
}

func newMemoryManager(ctx context.Context, kc kubeletConfig, machine *machineInfo, reservation v1.ResourceList,
	reserved []memoryReservation, stateDir string, tm topologymanager.Manager) (memorymanager.Manager, error) {
	return memorymanager.NewManager(klog.FromContext(ctx), kc.MemoryManagerPolicy, machine, reservation,
		memoryReservations(reserved), stateDir, tm)
}

// addAdmitHandlers adds, in kubelet.go's order, the admit handlers that can refuse a pod here:
// the container manager's resource allocation handler (the Topology Manager), the predicate
// handler, and the pod features handler. The others the kubelet adds (eviction, sysctls,
// AppArmor, declared features, node shutdown, resize) admit every pod of this component.
func addAdmitHandlers(n *node) {
	getNode := func(context.Context, bool) (*v1.Node, error) { return n.nodeObject() }
	n.allocations.AddPodAdmitHandlers(lifecycle.PodAdmitHandlers{
		n.topology,
		lifecycle.NewPredicateAdmitHandler(getNode, lifecycle.NewAdmissionFailureHandlerStub(), n.devices.UpdatePluginResources),
		lifecycle.NewPodFeaturesAdmitHandler(),
	})
}

// startManagers is the container manager's Start: CPU manager, memory manager, device manager.
func startManagers(n *node, containers containermap.ContainerMap, running sets.Set[string]) error {
	if err := n.cpus.Start(n.ctx, n.activePods, sourcesReady{}, n, fakeRuntime{}, containers.Clone()); err != nil {
		return err
	}
	if err := n.memory.Start(n.ctx, n.activePods, sourcesReady{}, n, fakeRuntime{}, containers.Clone()); err != nil {
		return err
	}
	return n.devices.Start(klog.FromContext(n.ctx), n.activePods, sourcesReady{}, containers.Clone(), running)
}

func stopDeviceManager(ctx context.Context, dm *devicemanager.ManagerImpl) {
	_ = dm.Stop(klog.FromContext(ctx))
}

func addPod(ctx context.Context, am allocation.Manager, active []*v1.Pod, pod *v1.Pod) (bool, string, string) {
	return am.AddPod(active, pod)
}

func removeAllocation(ctx context.Context, am allocation.Manager, uid types.UID) {
	am.RemovePod(uid)
}

// preStartContainer is internal_container_lifecycle.go PreStartContainer.
func preStartContainer(ctx context.Context, cpus cpumanager.Manager, memory memorymanager.Manager,
	tm topologymanager.Manager, pod *v1.Pod, container *v1.Container, id string) {
	logger := klog.FromContext(ctx)
	cpus.AddContainer(logger, pod, container, id)
	memory.AddContainer(logger, pod, container, id)
	tm.AddContainer(pod, container, id)
}

// postStopContainer is internal_container_lifecycle.go PostStopContainer.
func postStopContainer(ctx context.Context, tm topologymanager.Manager, id string) error {
	return tm.RemoveContainer(id)
}

func affinity(ctx context.Context, tm topologymanager.Manager, uid, name string) topologymanager.TopologyHint {
	return tm.GetAffinity(uid, name)
}

func deviceCapacity(ctx context.Context, dm *devicemanager.ManagerImpl) (v1.ResourceList, v1.ResourceList, []string) {
	return dm.GetCapacity()
}

func allocatableDevices(ctx context.Context, dm *devicemanager.ManagerImpl) devicemanager.ResourceDeviceInstances {
	return dm.GetAllocatableDevices()
}

// nodeObject is the node as the kubelet's node status setter computes it (nodestatus.go
// MachineInfo): capacity from the machine and the device plugins, allocatable less the
// reservation.
func (n *node) nodeObject() (*v1.Node, error) {
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.desc.Name, Labels: map[string]string{
		v1.LabelHostname: n.desc.Name, v1.LabelOSStable: "linux", v1.LabelArchStable: "amd64"}}}
	setter := nodestatus.MachineInfo(n.desc.Name, n.desc.Kubelet.MaxPods, 0,
		func() (*cadvisorapi.MachineInfo, error) { return n.machine, nil },
		func(bool) v1.ResourceList { return cadvisor.CapacityFromMachineInfo(n.machine) },
		n.devices.GetCapacity,
		n.desc.allocatableReservation,
		func(string, string, string) {}, false)
	return node, setter(n.ctx, node)
}

func newStub(devices []*pluginapi.Device, socket, resource string) *plugin.Stub {
	return plugin.NewDevicePluginStub(klog.Background(), devices, socket, resource, false, false)
}

func startStub(ctx context.Context, stub *plugin.Stub) error { return stub.Start(ctx) }

func registerStub(ctx context.Context, stub *plugin.Stub, kubeletSocket, resource string) error {
	return stub.Register(ctx, kubeletSocket, resource, "")
}

func stopStub(stub *plugin.Stub) { _ = stub.Stop(klog.Background()) }

// GetPodByName filters inactive pods as GetActivePods does (kubelet.go kubeletPodsProvider,
// since 1.35).
func (p *podsProvider) GetPodByName(namespace, name string) (*v1.Pod, bool) {
	pod, found := p.n.pods.GetPodByName(namespace, name)
	if !found || p.n.isPodInactive(pod) {
		return nil, false
	}
	return pod, true
}

func (p *resourcesProvider) UpdateAllocatedDevices() { p.n.devices.UpdateAllocatedDevices() }

func (p *resourcesProvider) GetAllocatableDevices() []*podresourcesv1.ContainerDevices {
	return containerDevices(p.n.devices.GetAllocatableDevices())
}

func (p *resourcesProvider) GetCPUs(podUID, containerName string) []int64 {
	return int64s(p.n.cpus.GetExclusiveCPUs(podUID, containerName).UnsortedList())
}

func (p *resourcesProvider) GetAllocatableCPUs() []int64 {
	return int64s(p.n.cpus.GetAllocatableCPUs().UnsortedList())
}

func (p *resourcesProvider) GetMemory(podUID, containerName string) []*podresourcesv1.ContainerMemory {
	return containerMemory(p.n.memory.GetMemory(podUID, containerName))
}

func (p *resourcesProvider) GetAllocatableMemory() []*podresourcesv1.ContainerMemory {
	return containerMemory(p.n.memory.GetAllocatableMemory())
}

func (p *resourcesProvider) GetDynamicResources(*v1.Pod, *v1.Container) []*podresourcesv1.DynamicResource {
	return nil
}
