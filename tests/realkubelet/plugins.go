package main

// The node's device plugins: the kubelet's own stub (devicemanager/plugin/v1beta1 Stub), one per
// resource, registered with the device manager over its registration socket as a real plugin
// registers, serving ListAndWatch (health changes included) and Allocate.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	plugin "k8s.io/kubernetes/pkg/kubelet/cm/devicemanager/plugin/v1beta1"
)

type devicePlugin struct {
	resource string
	stub     *plugin.Stub
	mu       sync.Mutex
	devices  []*pluginapi.Device
}

// allocate answers every container request with one response naming its devices, as a real
// plugin does: the stub's default returns no container responses, which the device manager
// takes as a failed allocation (UnexpectedAdmissionError).
func allocate(request *pluginapi.AllocateRequest, _ map[string]*pluginapi.Device) (*pluginapi.AllocateResponse, error) {
	response := &pluginapi.AllocateResponse{}
	for _, container := range request.ContainerRequests {
		response.ContainerResponses = append(response.ContainerResponses, &pluginapi.ContainerAllocateResponse{
			Envs: map[string]string{"DEVICES": strings.Join(container.DevicesIds, ",")},
		})
	}
	return response, nil
}

func pluginDevices(desc []deviceDescription) []*pluginapi.Device {
	var devices []*pluginapi.Device
	for _, d := range desc {
		device := &pluginapi.Device{ID: d.ID, Health: pluginapi.Healthy}
		if !d.Healthy {
			device.Health = pluginapi.Unhealthy
		}
		if d.NUMA != nil {
			device.Topology = &pluginapi.TopologyInfo{Nodes: []*pluginapi.NUMANode{}}
			for _, numa := range d.NUMA {
				device.Topology.Nodes = append(device.Topology.Nodes, &pluginapi.NUMANode{ID: numa})
			}
		}
		devices = append(devices, device)
	}
	return devices
}

func defaultAllocate(devices []deviceDescription) bool {
	for _, d := range devices {
		if d.PluginDefaultAllocate {
			return true
		}
	}
	return false
}

func (p *devicePlugin) current() []*pluginapi.Device {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.devices
}

func (p *devicePlugin) stop() {
	stopStub(p.stub)
}

// startPlugins starts one stub per resource, registers it, and waits until the device manager
// counts every device of it (registration and ListAndWatch run asynchronously).
func (n *node) startPlugins() error {
	byResource := map[string][]deviceDescription{}
	var order []string
	for _, d := range n.desc.Devices {
		if _, seen := byResource[d.Resource]; !seen {
			order = append(order, d.Resource)
		}
		byResource[d.Resource] = append(byResource[d.Resource], d)
	}
	kubeletSocket := filepath.Join(n.socketDir("device-plugins"), "kubelet.sock")
	for i, resource := range order {
		devices := n.pluginDevicesNow(resource, byResource[resource]) // restart.go
		socket := filepath.Join(n.socketDir("device-plugins"), fmt.Sprintf("plugin-%d.sock", i))
		stub := newStub(devices, socket, resource)
		if !defaultAllocate(byResource[resource]) {
			stub.SetAllocFunc(allocate)
		}
		p := &devicePlugin{resource: resource, stub: stub, devices: devices}
		n.plugins = append(n.plugins, p)
		if err := startStub(n.ctx, stub); err != nil {
			return fmt.Errorf("device plugin %s: %w", resource, err)
		}
		if err := registerStub(n.ctx, stub, kubeletSocket, resource); err != nil {
			return fmt.Errorf("device plugin %s: register: %w", resource, err)
		}
	}
	return n.waitForDevices()
}

// waitForDevices polls the device manager until each resource's capacity and allocatable
// count match what its plugin last sent, and its checkpoint says so too: the device manager
// writes it after taking the list (genericDeviceUpdateCallback), and a reader of the state
// files (the exporter, --watch-path) must find it written when the op returns.
func (n *node) waitForDevices() error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		capacity, allocatable, _ := deviceCapacity(n.ctx, n.devices)
		written := n.checkpointedHealthy()
		settled := true
		for _, p := range n.plugins {
			healthy := 0
			devices := p.current()
			for _, d := range devices {
				if d.Health == pluginapi.Healthy {
					healthy++
				}
			}
			c, a := capacity[v1ResourceName(p.resource)], allocatable[v1ResourceName(p.resource)]
			if c.Value() != int64(len(devices)) || a.Value() != int64(healthy) ||
				written[p.resource] != healthy {
				settled = false
			}
		}
		if settled {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("device plugins did not register within 10s")
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// checkpointedHealthy is how many healthy devices of each resource the device manager's
// checkpoint lists (its RegisteredDevices), -1 each when it cannot be read.
func (n *node) checkpointedHealthy() map[string]int {
	counts := map[string]int{}
	raw, err := os.ReadFile(filepath.Join(n.socketDir("device-plugins"), "kubelet_internal_checkpoint"))
	var checkpoint struct {
		Data struct {
			RegisteredDevices map[string][]string
		}
	}
	if err != nil || json.Unmarshal(raw, &checkpoint) != nil {
		for _, p := range n.plugins {
			counts[p.resource] = -1
		}
		return counts
	}
	for resource, ids := range checkpoint.Data.RegisteredDevices {
		counts[resource] = len(ids)
	}
	return counts
}

// setHealth sends the plugin's device list again with one device's health changed, as a plugin
// reports a health change through ListAndWatch.
func (n *node) setHealth(resource, id string, healthy bool) error {
	for _, p := range n.plugins {
		if p.resource != resource {
			continue
		}
		p.mu.Lock()
		var updated []*pluginapi.Device
		found := false
		for _, d := range p.devices {
			copied := &pluginapi.Device{ID: d.ID, Health: d.Health, Topology: d.Topology}
			if d.ID == id {
				found = true
				copied.Health = pluginapi.Unhealthy
				if healthy {
					copied.Health = pluginapi.Healthy
				}
			}
			updated = append(updated, copied)
		}
		if found {
			p.devices = updated
		}
		p.mu.Unlock()
		if !found {
			return fmt.Errorf("resource %s has no device %s", resource, id)
		}
		p.stub.Update(updated)
		return n.waitForDevices()
	}
	return fmt.Errorf("no device plugin for %s", resource)
}
