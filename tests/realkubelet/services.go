package main

// The node's gRPC services on unix sockets. podresources is served as the kubelet serves it
// (server.go ListenAndServePodResources: one gRPC server with the kubelet's global rate limiter,
// the v1alpha1 and v1 servers over the kubelet's providers). Another kubelet service that reads
// the same pod manager (e.g. the local Pods API) registers a starter in serviceStarters from its
// own file; reset starts every one of them on the new node.

import (
	"context"
	"fmt"
	"net"
	"os"

	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
	podresourcesv1alpha1 "k8s.io/kubelet/pkg/apis/podresources/v1alpha1"
	apisgrpc "k8s.io/kubernetes/pkg/kubelet/apis/grpc"
	"k8s.io/kubernetes/pkg/kubelet/apis/podresources"
	"k8s.io/kubernetes/pkg/kubelet/cm/devicemanager"
	memorystate "k8s.io/kubernetes/pkg/kubelet/cm/memorymanager/state"
)

// service is one served endpoint of a node: Socket goes in reset's reply under Name.
type service struct {
	Name   string
	Socket string
	server *grpc.Server
}

func (s service) stop() {
	if s.server != nil {
		s.server.Stop()
	}
	_ = os.Remove(s.Socket)
}

// serviceStarters: each starts one service on a node (the podresources one is first).
var serviceStarters = []func(n *node) (service, error){startPodResources}

func (n *node) startServices() error {
	for _, start := range serviceStarters {
		s, err := start(n)
		if err != nil {
			return err
		}
		if s.Name == "" {
			continue // not served on this node (its feature gate is off)
		}
		n.services = append(n.services, s)
	}
	return nil
}

// serveUnix serves server on a new unix socket at path until the server stops.
func serveUnix(server *grpc.Server, path string) error {
	listener, err := net.Listen("unix", path)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", path, err)
	}
	go func() {
		if err := server.Serve(listener); err != nil {
			klog.Background().V(2).Info("service stopped", "socket", path, "err", err)
		}
	}()
	return nil
}

func startPodResources(n *node) (service, error) {
	providers := podresources.PodResourcesProviders{
		Pods:             &podsProvider{n},
		Devices:          &resourcesProvider{n},
		Cpus:             &resourcesProvider{n},
		Memory:           &resourcesProvider{n},
		DynamicResources: &resourcesProvider{n},
	}
	server := grpc.NewServer(podResourcesRateLimiter(n.ctx))
	podresourcesv1alpha1.RegisterPodResourcesListerServer(server, podresources.NewV1alpha1PodResourcesServer(providers))
	podresourcesv1.RegisterPodResourcesListerServer(server, podresources.NewV1PodResourcesServer(n.ctx, providers))
	s := service{Name: "podresources", Socket: n.PodResourcesSocket(), server: server}
	return s, serveUnix(server, s.Socket)
}

// podsProvider is the kubelet's kubeletPodsProvider (kubelet.go) over this node's pod manager.
type podsProvider struct{ n *node }

func (p *podsProvider) GetActivePods() []*v1.Pod { return p.n.activePods() }
func (p *podsProvider) GetPods() []*v1.Pod       { return p.n.pods.GetPods() }

// resourcesProvider answers for the container manager (container_manager_linux.go GetDevices,
// GetCPUs, GetMemory and the allocatable ones) with the same calls into the managers. DRA is
// outside this component: GetDynamicResources reports no claims.
type resourcesProvider struct{ n *node }

// containerDevices is container_manager.go containerDevicesFromResourceDeviceInstances: one
// entry per device per NUMA node, none for a device without topology.
func containerDevices(devs devicemanager.ResourceDeviceInstances) []*podresourcesv1.ContainerDevices {
	var out []*podresourcesv1.ContainerDevices
	for resourceName, resourceDevs := range devs {
		for devID, dev := range resourceDevs {
			topo := dev.GetTopology()
			if topo == nil {
				out = append(out, &podresourcesv1.ContainerDevices{ResourceName: resourceName, DeviceIds: []string{devID}})
				continue
			}
			for _, numa := range topo.GetNodes() {
				out = append(out, &podresourcesv1.ContainerDevices{
					ResourceName: resourceName, DeviceIds: []string{devID},
					Topology: &podresourcesv1.TopologyInfo{Nodes: []*podresourcesv1.NUMANode{{ID: numa.GetID()}}},
				})
			}
		}
	}
	return out
}

func (p *resourcesProvider) GetDevices(podUID, containerName string) []*podresourcesv1.ContainerDevices {
	return containerDevices(p.n.devices.GetDevices(podUID, containerName))
}

// containerMemory is container_manager_linux.go containerMemoryFromBlock.
func containerMemory(blocks []memorystate.Block) []*podresourcesv1.ContainerMemory {
	var out []*podresourcesv1.ContainerMemory
	for _, b := range blocks {
		memory := &podresourcesv1.ContainerMemory{
			MemoryType: string(b.Type), Size: b.Size,
			Topology: &podresourcesv1.TopologyInfo{Nodes: []*podresourcesv1.NUMANode{}},
		}
		for _, numa := range b.NUMAAffinity {
			memory.Topology.Nodes = append(memory.Topology.Nodes, &podresourcesv1.NUMANode{ID: int64(numa)})
		}
		out = append(out, memory)
	}
	return out
}

func int64s(values []int) []int64 {
	out := make([]int64, 0, len(values))
	for _, v := range values {
		out = append(out, int64(v))
	}
	return out
}

// podResourcesRateLimiter is the kubelet's global limiter of the podresources service.
func podResourcesRateLimiter(ctx context.Context) grpc.ServerOption {
	return apisgrpc.WithRateLimiter(ctx, "podresources", podresources.DefaultQPS, podresources.DefaultBurstTokens)
}
