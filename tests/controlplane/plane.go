package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// readyTimeout bounds a start: a few seconds on an idle machine; the post-start hooks
// (bootstrap RBAC roles, priority classes, flow control) take much longer on a loaded one.
const readyTimeout = 150 * time.Second

type controlPlane struct {
	dir   string
	pki   *pki
	etcd  *embeddedEtcd
	api   *apiServer
	port  int
	flags []string
}

// start brings up etcd and the API server and returns once /readyz answers 200 (every
// post-start hook done: bootstrap RBAC roles, priority classes, the default namespaces).
func start(dir string, extraFlags []string) (*controlPlane, error) {
	p, err := newPKI(filepath.Join(dir, "pki"))
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "audit-policy.yaml"), []byte(auditPolicy), 0o600); err != nil {
		return nil, err
	}
	etcd, err := startEtcd(filepath.Join(dir, "etcd"), false)
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(1)
	if err != nil {
		etcd.close()
		return nil, err
	}
	plane := &controlPlane{dir: dir, pki: p, etcd: etcd, port: ports[0]}
	plane.flags = append(apiServerFlags(p, etcd.url, plane.port, dir), extraFlags...)
	if err := plane.run(plane.flags); err != nil {
		etcd.close()
		return nil, err
	}
	if err := plane.writeKubeconfig(filepath.Join(dir, "admin.kubeconfig")); err != nil {
		plane.close()
		return nil, err
	}
	return plane, nil
}

func (c *controlPlane) run(flags []string) error {
	api, err := startAPIServer(flags, c.port)
	if err != nil {
		return err
	}
	c.api = api
	return c.waitReady(api, readyTimeout)
}

// restart stops the API server and starts it again on the same etcd, port and certificates,
// with extra flags when given (for this run only).
func (c *controlPlane) restart(extra []string) error {
	c.api.stop()
	return c.run(append(append([]string{}, c.flags...), extra...))
}

func (c *controlPlane) server() string { return fmt.Sprintf("https://127.0.0.1:%d", c.port) }

func (c *controlPlane) waitReady(api *apiServer, timeout time.Duration) error {
	pool := x509.NewCertPool()
	pool.AddCert(c.pki.caCert)
	cert, err := tls.LoadX509KeyPair(c.pki.admin, c.pki.adminKey)
	if err != nil {
		return err
	}
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}}}}
	defer client.CloseIdleConnections()
	deadline := time.Now().Add(timeout)
	last := "no answer"
	for time.Now().Before(deadline) {
		select {
		case err := <-api.done:
			return fmt.Errorf("kube-apiserver stopped while starting: %v", err)
		default:
		}
		response, err := client.Get(c.server() + "/readyz")
		if err == nil {
			body, _ := io.ReadAll(response.Body)
			_ = response.Body.Close()
			if response.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Sprintf("HTTP %d: %s", response.StatusCode, body)
		} else {
			last = err.Error()
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("kube-apiserver not ready within %s: %s", timeout, last)
}

func (c *controlPlane) writeKubeconfig(path string) error {
	config := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
  - name: controlplane
    cluster:
      server: %s
      certificate-authority: %s
users:
  - name: admin
    user:
      client-certificate: %s
      client-key: %s
contexts:
  - name: admin
    context: {cluster: controlplane, user: admin}
current-context: admin
`, c.server(), c.pki.ca, c.pki.admin, c.pki.adminKey)
	return os.WriteFile(path, []byte(config), 0o600)
}

func (c *controlPlane) describe() reply {
	return reply{
		"server":                 c.server(),
		"port":                   c.port,
		"dir":                    c.dir,
		"ca":                     c.pki.ca,
		"ca_key":                 c.pki.caKey,
		"admin_cert":             c.pki.admin,
		"admin_key":              c.pki.adminKey,
		"admin_kubeconfig":       filepath.Join(c.dir, "admin.kubeconfig"),
		"audit_log":              filepath.Join(c.dir, "audit.log"),
		"etcd":                   c.etcd.url,
		"service_account_issuer": "https://kubernetes.default.svc.cluster.local",
		"kubernetes_version":     gitVersion(),
	}
}

func (c *controlPlane) close() {
	if c.api != nil {
		c.api.stop()
	}
	c.etcd.close()
}
