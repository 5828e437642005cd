package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/tools/cache"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
	"k8s.io/kubernetes/cmd/kube-apiserver/app/options"
)

// auditPolicy records every request but the API server's own (its loopback client's), at
// Metadata level: who asked for what (verb, URI with its query, user, status). The tests read
// it to see which requests the exporter made.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: None
    users: ["system:apiserver"]
  - level: Metadata
`

// apiServer is one run of kube-apiserver; restart makes another on the same etcd and port.
type apiServer struct {
	flags    []string
	cancel   context.CancelFunc
	done     chan error
	listener *trackingListener
}

// trackingListener is the API server's listener, keeping its connections: a stopped process
// takes its connections with it, which an in-process server does not (it waits up to its
// shutdown timeout, 60 s, for clients' HTTP/1.1 watches), so stop closes them.
type trackingListener struct {
	net.Listener
	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

type trackedConn struct {
	net.Conn
	owner *trackingListener
}

func (l *trackingListener) Accept() (net.Conn, error) {
	conn, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.conns[conn] = struct{}{}
	return &trackedConn{Conn: conn, owner: l}, nil
}

func (c *trackedConn) Close() error {
	c.owner.mu.Lock()
	delete(c.owner.conns, c.Conn)
	c.owner.mu.Unlock()
	return c.Conn.Close()
}

func (l *trackingListener) closeAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for conn := range l.conns {
		_ = conn.Close()
	}
	l.conns = map[net.Conn]struct{}{}
}

// apiServerFlags are kube-apiserver's command-line flags, as a kubeadm control plane sets
// them where they matter here.
func apiServerFlags(p *pki, etcdURL string, port int, dir string) []string {
	return []string{
		"--bind-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", port),
		"--advertise-address=127.0.0.1",
		// no controller manager keeps the kubernetes Service's endpoints; nothing reconciles
		"--endpoint-reconciler-type=none",
		"--etcd-servers=" + etcdURL,
		"--tls-cert-file=" + p.serving,
		"--tls-private-key-file=" + p.servingKey,
		"--client-ca-file=" + p.ca,
		"--authorization-mode=Node,RBAC",
		// the default plugins (NamespaceLifecycle, LimitRanger, ServiceAccount, PodSecurity,
		// Priority, DefaultTolerationSeconds, ..., ResourceQuota) plus kubeadm's NodeRestriction
		"--enable-admission-plugins=NodeRestriction",
		"--allow-privileged=true",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + p.saPub,
		"--service-account-signing-key-file=" + p.saKey,
		"--service-cluster-ip-range=10.96.0.0/16",
		"--audit-policy-file=" + filepath.Join(dir, "audit-policy.yaml"),
		"--audit-log-path=" + filepath.Join(dir, "audit.log"),
		"--audit-log-format=json",
		"--audit-log-mode=blocking",
		"--profiling=false",
		// resource.kubernetes.io/numaNode as a list (ints) is alpha in 1.37, off by default:
		// on here, as on a cluster whose drivers publish that form (SPEC 2 reads it)
		"--feature-gates=DRAListTypeAttributes=true",
	}
}

func startAPIServer(flags []string, port int) (*apiServer, error) {
	s := options.NewServerRunOptions()
	fs := pflag.NewFlagSet("kube-apiserver", pflag.ContinueOnError)
	for _, set := range s.Flags().FlagSets {
		fs.AddFlagSet(set)
	}
	if err := fs.Parse(flags); err != nil {
		return nil, fmt.Errorf("kube-apiserver flags: %w", err)
	}
	raw, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return nil, fmt.Errorf("kube-apiserver listener: %w", err)
	}
	listener := &trackingListener{Listener: raw, conns: map[net.Conn]struct{}{}}
	s.SecureServing.Listener, s.SecureServing.BindPort = listener, port
	if err := s.GenericServerRunOptions.ComponentGlobalsRegistry.Set(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	completed, err := s.Complete(ctx)
	if err != nil {
		cancel()
		_ = listener.Close()
		return nil, fmt.Errorf("kube-apiserver options: %w", err)
	}
	if errs := completed.Validate(); len(errs) != 0 {
		cancel()
		_ = listener.Close()
		var texts []string
		for _, e := range errs {
			texts = append(texts, e.Error())
		}
		return nil, fmt.Errorf("kube-apiserver options: %s", strings.Join(texts, "; "))
	}
	// app.Run registers its informers under the name "kube-apiserver", unique in a process
	// until released: taken here and released when this run ends, so a restart can take it.
	informers, err := cache.NewInformerName("kube-apiserver")
	if err != nil {
		cancel()
		_ = listener.Close()
		return nil, err
	}
	completed.InformerName = informers
	server := &apiServer{flags: flags, cancel: cancel, done: make(chan error, 1),
		listener: listener}
	go func() {
		err := app.Run(ctx, completed)
		informers.Release()
		server.done <- err
	}()
	return server, nil
}

// stop cancels the server's context, as SIGTERM does, and waits for it to shut down.
func (a *apiServer) stop() {
	if a.cancel == nil {
		return
	}
	a.cancel()
	a.cancel = nil
	select {
	case <-a.done:
		return
	case <-time.After(2 * time.Second):
	}
	// what is still open after the requests had 2 s: watches, idle keep-alive connections;
	// the process would be gone by now, and its connections with it
	a.listener.closeAll()
	select {
	case <-a.done:
	case <-time.After(60 * time.Second):
		fmt.Fprintln(os.Stderr, "controlplane: kube-apiserver did not stop within 60 s")
	}
}
