{{/* Chart name, overridable. */}}
{{- define "podresources-exporter.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Fully qualified app name; the release name alone when it already contains the chart name. */}}
{{- define "podresources-exporter.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "podresources-exporter.namespace" -}}
{{- default .Release.Namespace .Values.namespaceOverride }}
{{- end }}

{{- define "podresources-exporter.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Selector labels: fixed forever, a DaemonSet's selector cannot change on upgrade. */}}
{{- define "podresources-exporter.selectorLabels" -}}
app.kubernetes.io/name: {{ include "podresources-exporter.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "podresources-exporter.labels" -}}
helm.sh/chart: {{ include "podresources-exporter.chart" . }}
{{ include "podresources-exporter.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: metrics
app.kubernetes.io/part-of: podresources-exporter
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "podresources-exporter.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "podresources-exporter.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
registry/repository:tag[@digest]; the tag defaults to the chart's appVersion and
global.imageRegistry, when set, replaces image.registry.
*/}}
{{- define "podresources-exporter.image" -}}
{{- $repository := .Values.image.repository }}
{{- $registry := .Values.image.registry }}
{{- with (.Values.global | default dict).imageRegistry }}
{{- $registry = . }}
{{- end }}
{{- if $registry }}
{{- $repository = printf "%s/%s" (trimSuffix "/" $registry) .Values.image.repository }}
{{- end }}
{{- $image := printf "%s:%s" $repository (default .Chart.AppVersion .Values.image.tag) }}
{{- if .Values.image.digest }}
{{- $image = printf "%s@%s" $image .Values.image.digest }}
{{- end }}
{{- $image }}
{{- end }}

{{/* "true" when the exporter serves HTTPS: probes, monitors and the test follow. */}}
{{- define "podresources-exporter.https" -}}
{{- $web := .Values.webConfig }}
{{- if and $web.enabled (or $web.https (hasKey ($web.config | default dict) "tls_server_config")) }}true{{ end }}
{{- end }}

{{- define "podresources-exporter.scheme" -}}
{{- if include "podresources-exporter.https" . }}https{{ else }}http{{ end }}
{{- end }}

{{- define "podresources-exporter.webConfigSecretName" -}}
{{- default (printf "%s-web-config" (include "podresources-exporter.fullname" .)) .Values.webConfig.existingSecret }}
{{- end }}

{{/* A probe from values with the metrics port and the scheme filled in. */}}
{{- define "podresources-exporter.probe" -}}
{{- $probe := deepCopy .probe }}
{{- if $probe.httpGet }}
{{- $_ := set $probe.httpGet "port" "metrics" }}
{{- $_ := set $probe.httpGet "scheme" (upper (include "podresources-exporter.scheme" .root)) }}
{{- end }}
{{- toYaml $probe }}
{{- end }}

{{/* The endpoint settings ServiceMonitor and PodMonitor share. */}}
{{- define "podresources-exporter.scrapeEndpoint" -}}
{{- $monitor := .monitor }}
port: metrics
path: /metrics
scheme: {{ default (include "podresources-exporter.scheme" .root) $monitor.scheme }}
honorLabels: {{ $monitor.honorLabels }}
{{- with $monitor.interval }}
interval: {{ . }}
{{- end }}
{{- with $monitor.scrapeTimeout }}
scrapeTimeout: {{ . }}
{{- end }}
{{- with $monitor.tlsConfig }}
tlsConfig:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $monitor.basicAuth }}
basicAuth:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $monitor.authorization }}
authorization:
  {{- toYaml . | nindent 2 }}
{{- end }}
relabelings:
  # The exporter adds no node label; dashboards and alerts join on this one.
  - sourceLabels: [__meta_kubernetes_pod_node_name]
    targetLabel: node
    action: replace
{{- with $monitor.relabelings }}
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $monitor.metricRelabelings }}
metricRelabelings:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/*
Checkov findings that are deliberate, as checkov.io/skipN annotations carrying the reason (read
by checkov and by people). Each appears only while the values that cause it are in force.
*/}}
{{- define "podresources-exporter.checkovReasons" -}}
{{- $reasons := list }}
{{- if not .root.Values.image.digest }}
{{- $reasons = append $reasons "CKV_K8S_43=pinned by its release tag; set image.digest to pin by digest as well" }}
{{- end }}
{{- if ne .root.Values.image.pullPolicy "Always" }}
{{- $reasons = append $reasons "CKV_K8S_15=release tags are immutable; Always would make every pod restart on every node depend on the registry" }}
{{- end }}
{{- if eq .object "daemonset" }}
{{- if .root.Values.kubeApi.enabled }}
{{- $reasons = append $reasons "CKV_K8S_38=the Kubernetes-API view (kubeApi.enabled) reads nodes, pods, resourceslices and devicetaintrules with this token" }}
{{- end }}
{{- if not .root.Values.networkPolicy.enabled }}
{{- $reasons = append $reasons "CKV2_K8S_6=NetworkPolicy is opt-in (networkPolicy.enabled): not every CNI enforces one" }}
{{- end }}
{{- if not .root.Values.securityContext.runAsNonRoot }}
{{- $reasons = append $reasons "CKV_K8S_23=uid 0 is required to connect to the kubelet's root-owned pod-resources socket; all capabilities are dropped" }}
{{- end }}
{{- if lt (int (.root.Values.securityContext.runAsUser | default 0)) 10000 }}
{{- $reasons = append $reasons "CKV_K8S_40=uid 0 is required to connect to the kubelet's root-owned pod-resources socket; all capabilities are dropped" }}
{{- end }}
{{- else }}
{{- $reasons = append $reasons "CKV2_K8S_6=a run-once helm test pod, which the exporter's NetworkPolicy admits" }}
{{- $reasons = append $reasons "CKV_K8S_8=a run-once helm test pod has nothing for a liveness probe to restart" }}
{{- $reasons = append $reasons "CKV_K8S_9=a run-once helm test pod serves no traffic for a readiness probe to gate" }}
{{- end }}
{{- range $i, $reason := $reasons }}
checkov.io/skip{{ add1 $i }}: {{ $reason | quote }}
{{- end }}
{{- end }}

{{/* The helm test pod's labels (the NetworkPolicy lets it in). */}}
{{- define "podresources-exporter.testSelectorLabels" -}}
app.kubernetes.io/name: {{ include "podresources-exporter.name" . }}-test
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/*
imagePullSecrets from imagePullSecrets and global.imagePullSecrets, each a name or a {name: ...}
reference, as LocalObjectReferences without duplicates; empty when there are none.
*/}}
{{- define "podresources-exporter.imagePullSecrets" -}}
{{- $names := list }}
{{- range concat ((.Values.global | default dict).imagePullSecrets | default list) (.Values.imagePullSecrets | default list) }}
{{- $name := . }}
{{- if kindIs "map" . }}
{{- $name = get . "name" }}
{{- end }}
{{- if and $name (not (has $name $names)) }}
{{- $names = append $names $name }}
{{- end }}
{{- end }}
{{- range $names }}
- name: {{ . }}
{{- end }}
{{- end }}

{{/*
The pods' affinity: .Values.affinity with, while excludeVirtualNodes is on, the exclusion of
nodes that have no kubelet of their own added to every required nodeSelectorTerm (terms are
ORed, so each needs it), or as the only term when none is given.
*/}}
{{- define "podresources-exporter.affinity" -}}
{{- $affinity := deepCopy (.Values.affinity | default dict) }}
{{- if .Values.excludeVirtualNodes }}
{{- $exclusion := list
      (dict "key" "eks.amazonaws.com/compute-type" "operator" "NotIn" "values" (list "fargate"))
      (dict "key" "type" "operator" "NotIn" "values" (list "virtual-kubelet")) }}
{{- $nodeAffinity := get $affinity "nodeAffinity" | default dict }}
{{- $required := get $nodeAffinity "requiredDuringSchedulingIgnoredDuringExecution" | default dict }}
{{- $terms := list }}
{{- range (get $required "nodeSelectorTerms" | default list) }}
{{- $terms = append $terms (set (deepCopy .) "matchExpressions" (concat (get . "matchExpressions" | default list) $exclusion)) }}
{{- end }}
{{- if not $terms }}
{{- $terms = list (dict "matchExpressions" $exclusion) }}
{{- end }}
{{- $_ := set $required "nodeSelectorTerms" $terms }}
{{- $_ := set $nodeAffinity "requiredDuringSchedulingIgnoredDuringExecution" $required }}
{{- $_ := set $affinity "nodeAffinity" $nodeAffinity }}
{{- end }}
{{- if $affinity }}
{{- toYaml $affinity }}
{{- end }}
{{- end }}
