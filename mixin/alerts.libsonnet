// The alerting and recording rules: mixin/rules.json (generated from dashboards/rules.py, with
// placeholders) filled from _config. With the defaults they are exactly the groups of
// dashboards/rules/podresources-exporter.rules.yaml.
local rules = import 'rules.json';

local number(value) =
  if std.isString(value) then value
  else if value == std.floor(value) then '%d' % value
  else '%g' % value;

local fill(text, values) = std.foldl(
  function(acc, key) std.strReplace(acc, '<<' + key + '>>', values[key]),
  std.objectFields(values),
  text
);

{
  prometheusRules+:: {
    groups+: [
      {
        name: group.name,
        rules: [
          { record: r.record, expr: fill(r.expr, { cluster: $._config.clusterLabel, job: $._config.jobSelector }) }
          + (if std.objectHas(r, 'labels') then { labels: r.labels } else {})
          for r in group.rules
        ],
      }
      for group in rules.recording
    ],
  },

  prometheusAlerts+:: {
    local config = $._config,
    groups+: [{
      name: rules.groups.alerting,
      rules: [
        local settings = std.get(config.alerts, a.alert, {});
        local forValue = std.get(settings, 'for', a['for']);
        local threshold = std.get(settings, 'threshold', a.threshold);
        local values = {
          cluster: config.clusterLabel,
          job: config.jobSelector,
          'for': forValue,
          threshold: if threshold == null then '' else number(threshold),
        };
        {
          alert: a.alert,
          expr: fill(a.expr, values),
          'for': forValue,
          labels: config.extraLabels + std.get(settings, 'labels', {})
                  + { severity: std.get(settings, 'severity', a.severity) },
          annotations: {
            summary: a.summary,
            description: fill(a.description, values),
            runbook_url: config.runbookBaseUrl + std.asciiLower(a.alert),
          } + config.extraAnnotations + std.get(settings, 'annotations', {}),
        }
        for a in rules.alerting
        if !std.member(config.disabledAlerts, a.alert)
      ],
    }],
  },
}
