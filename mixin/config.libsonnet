// Settings of the podresources-exporter mixin; override any of them:
//   (import 'podresources-exporter-mixin/mixin.libsonnet') + { _config+:: { clusterLabel: 'region' } }
{
  _config+:: {
    // Label matchers selecting the exporter's scrape job, for PodresourcesExporterDown (up is
    // shared by every target; the podresources_* series need no selector).
    jobSelector: 'job=~".*podresources-exporter.*"',
    // The label that tells clusters apart (Thanos, Mimir); every recording rule and alert keeps
    // it, every dashboard query filters on it.
    clusterLabel: 'cluster',
    // Show the dashboards' cluster picker (hidden by default: one cluster, nothing to choose).
    showMultiCluster: false,
    // runbook_url = runbookBaseUrl + the alert name in lower case.
    runbookBaseUrl: 'https://github.com/podresources-exporter/podresources-exporter/blob/main/docs/alerts.md#',
    // Alerts left out, by name.
    disabledAlerts: [],
    // Labels and annotations added to every alert.
    extraLabels: {},
    extraAnnotations: {},
    // Per alert: threshold (where it has one), 'for', severity, labels, annotations. E.g.
    //   alerts: { PodresourcesNumaCpuExhausted: { threshold: 0.9, 'for': '30m' } },
    alerts: {},
  },
}
