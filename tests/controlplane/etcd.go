package main

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// embeddedEtcd is one etcd member in this process, on loopback ports of its own, as
// k8s.io/apiserver's storage test server runs it (no fsync: the data is thrown away).
type embeddedEtcd struct {
	server    *embed.Etcd
	client    *clientv3.Client
	url       string
	compacted int64
}

func startEtcd(dir string, verbose bool) (*embeddedEtcd, error) {
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	cfg := embed.NewConfig()
	cfg.Dir = dir
	cfg.UnsafeNoFsync = true
	clientURL := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", ports[0])}
	peerURL := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", ports[1])}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{clientURL}, []url.URL{clientURL}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peerURL}, []url.URL{peerURL}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.LogLevel = "error"
	if !verbose {
		cfg.LogLevel = "fatal"
	}
	server, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("etcd: %w", err)
	}
	select {
	case <-server.Server.ReadyNotify():
	case <-time.After(60 * time.Second):
		server.Close()
		return nil, fmt.Errorf("etcd: not ready within 60 s")
	}
	client, err := clientv3.New(clientv3.Config{Endpoints: []string{clientURL.String()},
		DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		server.Close()
		return nil, fmt.Errorf("etcd client: %w", err)
	}
	return &embeddedEtcd{server: server, client: client, url: clientURL.String()}, nil
}

// revision is etcd's current revision (every write increments it; an object's
// resourceVersion is the revision that wrote it) and the last compacted one.
func (e *embeddedEtcd) revision() (int64, int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	status, err := e.client.Status(ctx, e.url)
	if err != nil {
		return 0, 0, err
	}
	return status.Header.Revision, e.compacted, nil
}

// compact forgets every revision before the current one, as the API server's own compactor
// does every five minutes: a watch or list from an older resourceVersion that reaches etcd
// is then answered 410 Gone.
func (e *embeddedEtcd) compact() (int64, error) {
	revision, _, err := e.revision()
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := e.client.Compact(ctx, revision, clientv3.WithCompactPhysical()); err != nil {
		return 0, fmt.Errorf("etcd compaction at %d: %w", revision, err)
	}
	e.compacted = revision
	return revision, nil
}

func (e *embeddedEtcd) close() {
	_ = e.client.Close()
	e.server.Close()
}

// freePorts are loopback ports nothing listens on now (closed again before use; the window
// is the one k8s.io/apiserver's test server accepts too).
func freePorts(count int) ([]int, error) {
	var ports []int
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}()
	for i := 0; i < count; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
