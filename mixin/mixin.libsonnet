// podresources-exporter monitoring mixin: alerts, recording rules and Grafana dashboards for
// per-NUMA use of the kubelet's exclusive resources. Build (see README.md):
//   jsonnet -S -e 'std.manifestYamlDoc((import "mixin.libsonnet").prometheusAlerts)'
(import 'config.libsonnet') +
(import 'alerts.libsonnet') +
(import 'dashboards.libsonnet')
