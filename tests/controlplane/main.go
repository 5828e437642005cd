// Command controlplane runs a real Kubernetes control plane for the tests: kube-apiserver of
// k8s.io/kubernetes (the release tests/realkubelet is built from) in this process, on an etcd
// embedded in it, with TLS, client certificates, ServiceAccount tokens, the Node and RBAC
// authorizers and the default admission plugins (Pod Security included). No controller runs:
// the tests create what the controllers would.
//
// It prints one JSON line when the API server is ready (addresses, certificate files, the
// admin kubeconfig, how long the start took), then answers one JSON request per line on stdin
// (README.md lists them), one JSON reply per line on stdout. Logs go to stderr only with -v.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"
)

type request struct {
	Op    string   `json:"op"`
	Flags []string `json:"flags,omitempty"`
}

type reply map[string]any

func main() {
	dir := flag.String("dir", "", "state directory: etcd's data, the PKI, kubeconfigs, the audit log (default: a new temporary directory)")
	verbosity := flag.Int("v", 0, "kube-apiserver log verbosity on stderr (0: errors only)")
	flag.Parse()
	started := time.Now()
	if *dir == "" {
		made, err := os.MkdirTemp("", "controlplane-")
		if err != nil {
			fail(err)
		}
		*dir = made
	}
	setUpLogs(*verbosity)

	plane, err := start(*dir, flag.Args())
	if err != nil {
		fail(err)
	}
	out := json.NewEncoder(os.Stdout)
	ready := plane.describe()
	ready["ok"] = true
	ready["start_seconds"] = time.Since(started).Seconds()
	if err := out.Encode(ready); err != nil {
		plane.close()
		return
	}

	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 16<<20)
	for in.Scan() {
		var req request
		answer := reply{}
		if err := json.Unmarshal(in.Bytes(), &req); err != nil {
			answer = reply{"ok": false, "error": "bad request: " + err.Error()}
		} else if answer, err = handle(plane, &req); err != nil {
			answer = reply{"ok": false, "error": err.Error()}
		} else {
			answer["ok"] = true
		}
		if err := out.Encode(answer); err != nil || req.Op == "close" {
			break
		}
	}
	plane.close()
}

func handle(plane *controlPlane, req *request) (reply, error) {
	switch req.Op {
	case "compact":
		revision, err := plane.etcd.compact()
		if err != nil {
			return nil, err
		}
		return reply{"revision": revision}, nil
	case "revision":
		revision, compacted, err := plane.etcd.revision()
		if err != nil {
			return nil, err
		}
		return reply{"revision": revision, "compacted": compacted}, nil
	case "restart":
		started := time.Now()
		if err := plane.restart(req.Flags); err != nil {
			return nil, err
		}
		return reply{"restart_seconds": time.Since(started).Seconds()}, nil
	case "stop":
		plane.api.stop()
		return reply{}, nil
	case "version", "describe":
		return plane.describe(), nil
	case "close":
		return reply{}, nil
	}
	return nil, fmt.Errorf("unknown op %q", req.Op)
}

func fail(err error) {
	out := json.NewEncoder(os.Stdout)
	_ = out.Encode(reply{"ok": false, "error": err.Error()})
	os.Exit(1)
}
