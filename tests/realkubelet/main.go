// Command realkubelet runs the kubelet's own resource admission code for one simulated node and
// answers a small control interface on stdin/stdout: one JSON request per line, one JSON reply
// per line (README.md describes both). Logs go nowhere unless -v is given.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

type request struct {
	Op          string           `json:"op"`
	Node        *nodeDescription `json:"node,omitempty"`
	Pod         *v1.Pod          `json:"pod,omitempty"`
	Namespace   string           `json:"namespace,omitempty"`
	Name        string           `json:"name,omitempty"`
	Containers  []string         `json:"containers,omitempty"`
	Container   string           `json:"container,omitempty"`
	Resource    string           `json:"resource,omitempty"`
	Device      string           `json:"device,omitempty"`
	Healthy     bool             `json:"healthy,omitempty"`
	Phase       string           `json:"phase,omitempty"`
	Terminating bool             `json:"terminating,omitempty"`
	Merge       *mergeRequest    `json:"merge,omitempty"` // mergeop.go
	PluginsLate bool             `json:"plugins_late,omitempty"`
}

type reply map[string]any

func main() {
	verbosity := flag.Int("v", 0, "kubelet log verbosity on stderr (0: no logs)")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	flag.StringVar(&baseDir, "dir", "", "where each node's state, sockets and sysfs tree go (default: the temporary directory)")
	flag.Parse()
	setUpLogs(*verbosity)
	if *cpuProfile != "" {
		file, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		_ = pprof.StartCPUProfile(file)
		defer pprof.StopCPUProfile()
	}

	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 256<<20)
	out := json.NewEncoder(os.Stdout)
	var current *node
	defer func() {
		if current != nil {
			current.close()
		}
	}()
	for in.Scan() {
		var req request
		var answer reply
		if err := json.Unmarshal(in.Bytes(), &req); err != nil {
			answer = reply{"ok": false, "error": "bad request: " + err.Error()}
		} else {
			var err error
			current, answer, err = handle(current, &req)
			if err != nil {
				answer = reply{"ok": false, "error": err.Error()}
			} else {
				answer["ok"] = true
			}
		}
		if err := out.Encode(answer); err != nil {
			return
		}
		if req.Op == "close" {
			return
		}
	}
}

func setUpLogs(verbosity int) {
	flags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(flags)
	_ = flags.Set("v", fmt.Sprint(verbosity))
	_ = flags.Set("logtostderr", "false")
	_ = flags.Set("alsologtostderr", "false")
	_ = flags.Set("stderrthreshold", "FATAL")
	if verbosity > 0 {
		klog.SetOutput(os.Stderr)
	} else {
		klog.SetOutput(io.Discard)
	}
}

func handle(current *node, req *request) (*node, reply, error) {
	if req.Op == "reset" {
		if req.Node == nil {
			return current, nil, fmt.Errorf("reset needs a node description")
		}
		if current != nil {
			current.close()
			current = nil
		}
		fresh, err := newNode(*req.Node)
		if err != nil {
			return nil, nil, err
		}
		answer := reply{"kubernetes_version": kubernetesVersion, "sysfs_root": fresh.SysfsRoot(), "root_dir": fresh.dir}
		sockets := map[string]string{}
		for _, s := range fresh.services {
			sockets[s.Name] = s.Socket
		}
		answer["sockets"] = sockets
		answer["podresources_socket"] = fresh.PodResourcesSocket()
		return fresh, answer, nil
	}
	if req.Op == "version" {
		return current, reply{"kubernetes_version": kubernetesVersion}, nil
	}
	if req.Op == "merge" {
		if req.Merge == nil {
			return current, nil, fmt.Errorf("merge needs hint lists")
		}
		answer, err := runMerge(req.Merge)
		return current, reply{"merge": answer}, err
	}
	if req.Op == "close" {
		return current, reply{}, nil
	}
	if current == nil {
		return nil, nil, fmt.Errorf("%s: no node yet (reset first)", req.Op)
	}
	switch req.Op {
	case "admit":
		if req.Pod == nil {
			return current, nil, fmt.Errorf("admit needs a pod")
		}
		result, err := current.admit(req.Pod)
		if err != nil {
			return current, nil, err
		}
		return current, reply{"result": result}, nil
	case "start":
		return current, reply{}, current.start(req.Namespace, req.Name, req.Containers)
	case "finish":
		return current, reply{}, current.finishByName(req.Namespace, req.Name, req.Container)
	case "phase":
		return current, reply{}, current.setPhase(req.Namespace, req.Name, v1.PodPhase(req.Phase), req.Terminating)
	case "remove":
		return current, reply{}, current.remove(req.Namespace, req.Name)
	case "health":
		return current, reply{}, current.setHealth(req.Resource, req.Device, req.Healthy)
	case "restart": // restart.go
		return current, reply{}, current.restart(req.PluginsLate)
	case "plugins":
		return current, reply{}, current.registerLatePlugins()
	case "pod":
		pod, err := current.pod(req.Namespace, req.Name)
		if err != nil {
			return current, nil, err
		}
		return current, reply{"containers": current.containerResults(pod)}, nil
	case "objects":
		node, pods, err := current.apiObjects()
		if err != nil {
			return current, nil, err
		}
		return current, reply{"node": node, "pods": pods}, nil
	case "topology":
		view, err := current.cpuTopology()
		if err != nil {
			return current, nil, err
		}
		return current, reply{"topology": view}, nil
	case "dump":
		d, err := current.dump()
		if err != nil {
			return current, nil, err
		}
		return current, reply{"dump": d}, nil
	}
	return current, nil, fmt.Errorf("unknown op %q", req.Op)
}
