// The dashboards (mixin/dashboards/*.json, minified copies of dashboards/*.json written by
// `python -m dashboards.generate`), with the cluster label renamed and the cluster picker shown
// as _config says: the same two rewrites as dashboards/panels.py's relabel() and the chart's.
local files = {
  'podresources-numa-overview.json': importstr 'dashboards/numa-overview.json',
  'podresources-cluster-topology-fit.json': importstr 'dashboards/cluster-topology-fit.json',
  'podresources-exporter-health.json': importstr 'dashboards/exporter-health.json',
};

{
  grafanaDashboards+:: {
    local config = $._config,
    local relabel(text) =
      if config.clusterLabel == 'cluster' then text
      else std.strReplace(
        std.strReplace(text, 'cluster=\\"$cluster\\"', config.clusterLabel + '=\\"$cluster\\"'),
        ', cluster)', ', ' + config.clusterLabel + ')'
      ),
    local picker(text) = if config.showMultiCluster then std.strReplace(text, '"hide":2', '"hide":0') else text,
    [name]: std.parseJson(picker(relabel(files[name])))
    for name in std.objectFields(files)
  },
}
