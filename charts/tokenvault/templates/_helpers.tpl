{{/* Names ------------------------------------------------------------------------------------------------------ */}}

{{- define "tokenvault.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The release's base name, at most 42 characters: component names append up to 14 ("-etcd-headless"), and a
StatefulSet's name plus its 11-character revision hash must fit a 63-character label. */}}
{{- define "tokenvault.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 42 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 42 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 42 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "tokenvault.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "tokenvault.api.name" -}}{{ include "tokenvault.fullname" . }}-api{{- end -}}
{{- define "tokenvault.worker.name" -}}{{ include "tokenvault.fullname" . }}-worker{{- end -}}
{{- define "tokenvault.controller.name" -}}{{ include "tokenvault.fullname" . }}-controller{{- end -}}
{{- define "tokenvault.etcd.name" -}}{{ include "tokenvault.fullname" . }}-etcd{{- end -}}
{{- define "tokenvault.etcd.headless" -}}{{ include "tokenvault.fullname" . }}-etcd-headless{{- end -}}

{{- define "tokenvault.kek.secretName" -}}
{{- .Values.kek.existingSecret | default (printf "%s-kek" (include "tokenvault.fullname" .)) -}}
{{- end -}}

{{- define "tokenvault.operatorKey.secretName" -}}
{{- .Values.operatorKey.existingSecret | default (printf "%s-operator-key" (include "tokenvault.fullname" .)) -}}
{{- end -}}

{{- define "tokenvault.workerSecret.secretName" -}}
{{- .Values.workerSecret.existingSecret | default (printf "%s-worker-secret" (include "tokenvault.fullname" .)) -}}
{{- end -}}

{{- define "tokenvault.etcd.serverTlsSecret" -}}{{ include "tokenvault.fullname" . }}-etcd-server-tls{{- end -}}
{{- define "tokenvault.etcd.clientTlsSecret" -}}{{ include "tokenvault.fullname" . }}-etcd-client-tls{{- end -}}

{{/* Whether the chart's etcd runs with TLS and client-certificate authentication. */}}
{{- define "tokenvault.etcd.tls" -}}
{{- if and .Values.etcd.enabled .Values.etcd.tls.enabled -}}true{{- end -}}
{{- end -}}

{{/* The namespace whose custom resources the controller reconciles (namespaced scope). */}}
{{- define "tokenvault.controller.watchNamespace" -}}
{{- .Values.controller.watchNamespace | default .Release.Namespace -}}
{{- end -}}

{{- define "tokenvault.controller.leaseName" -}}
{{- .Values.controller.leaderElection.leaseName | default (include "tokenvault.controller.name" .) -}}
{{- end -}}

{{/* Labels ----------------------------------------------------------------------------------------------------- */}}

{{- define "tokenvault.selectorLabels" -}}
app.kubernetes.io/name: {{ include "tokenvault.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "tokenvault.labels" -}}
helm.sh/chart: {{ include "tokenvault.chart" . }}
{{ include "tokenvault.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: tokenvault
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Component labels: include with (dict "ctx" $ "component" "api"). */}}
{{- define "tokenvault.componentSelectorLabels" -}}
{{ include "tokenvault.selectorLabels" .ctx }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "tokenvault.componentLabels" -}}
{{ include "tokenvault.labels" .ctx }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* Images and URLs --------------------------------------------------------------------------------------------- */}}

{{- define "tokenvault.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}
{{- end -}}

{{/* The image of dedicated tenant workers when a Tenant names none. */}}
{{- define "tokenvault.controller.workerImage" -}}
{{- .Values.controller.workerImage | default (include "tokenvault.image" .) -}}
{{- end -}}

{{- define "tokenvault.api.url" -}}
{{- printf "http://%s:%v" (include "tokenvault.api.name" .) .Values.api.service.port -}}
{{- end -}}

{{- define "tokenvault.worker.url" -}}
{{- printf "http://%s:%v" (include "tokenvault.worker.name" .) .Values.worker.service.port -}}
{{- end -}}

{{/* TOKENVAULT_DEDICATED_WORKER_URLS: the dedicated workers the API may call. The controller's own (its naming,
tokenvault-worker-<tenant>, in the namespace it watches, or in any with watchAllNamespaces), then
controller.dedicatedWorkers.allowedUrls. Empty: none, every tenant runs on the shared workers. */}}
{{- define "tokenvault.dedicatedWorkerUrls" -}}
{{- $urls := list -}}
{{- if .Values.controller.enabled -}}
{{- $namespace := ternary "*" (include "tokenvault.controller.watchNamespace" .) .Values.controller.watchAllNamespaces -}}
{{- $urls = append $urls (printf "http://tokenvault-worker-*.%s.svc:8080" $namespace) -}}
{{- end -}}
{{- concat $urls .Values.controller.dedicatedWorkers.allowedUrls | join "," -}}
{{- end -}}

{{/* TOKENVAULT_STORE: the etcd members here (each by its stable DNS name, so the client fails over between them),
or the external endpoints. */}}
{{- define "tokenvault.store" -}}
{{- if .Values.etcd.enabled -}}
{{- $members := list -}}
{{- range $i := until (int .Values.etcd.replicas) -}}
{{- $members = append $members (printf "%s-%d.%s.%s.svc:2379" (include "tokenvault.etcd.name" $) $i (include "tokenvault.etcd.headless" $) $.Release.Namespace) -}}
{{- end -}}
{{- printf "%s://%s" (ternary "etcds" "etcd" .Values.etcd.tls.enabled) (join "," $members) -}}
{{- else -}}
{{- $scheme := ternary "etcds" "etcd" .Values.etcd.external.tls.enabled -}}
{{- printf "%s://%s" $scheme (join "," .Values.etcd.external.endpoints) -}}
{{- end -}}
{{- end -}}

{{/* The worker secret: the API sends it, the workers require it, the controller hands it to dedicated workers. */}}
{{- define "tokenvault.workerSecretEnv" -}}
- name: TOKENVAULT_WORKER_SECRET_FILE
  value: /etc/tokenvault/worker-secret/{{ .Values.workerSecret.secretKey }}
{{- end -}}

{{- define "tokenvault.workerSecretVolumeMount" -}}
- name: worker-secret
  mountPath: /etc/tokenvault/worker-secret
  readOnly: true
{{- end -}}

{{- define "tokenvault.workerSecretVolume" -}}
- name: worker-secret
  secret:
    secretName: {{ include "tokenvault.workerSecret.secretName" . }}
    defaultMode: 0440
{{- end -}}

{{/* Pod pieces -------------------------------------------------------------------------------------------------- */}}

{{- define "tokenvault.imagePullSecrets" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* A soft spread over nodes, and over zones (topology.kubernetes.io/zone) with "zones" true: include with
(dict "ctx" $ "component" "api" "enabled" true "zones" false). */}}
{{- define "tokenvault.spread" -}}
{{- if or .enabled .zones }}
topologySpreadConstraints:
  {{- if .zones }}
  - maxSkew: 1
    topologyKey: topology.kubernetes.io/zone
    whenUnsatisfiable: ScheduleAnyway
    labelSelector:
      matchLabels:
        {{- include "tokenvault.componentSelectorLabels" (dict "ctx" .ctx "component" .component) | nindent 8 }}
  {{- end }}
  {{- if .enabled }}
  - maxSkew: 1
    topologyKey: kubernetes.io/hostname
    whenUnsatisfiable: ScheduleAnyway
    labelSelector:
      matchLabels:
        {{- include "tokenvault.componentSelectorLabels" (dict "ctx" .ctx "component" .component) | nindent 8 }}
  {{- end }}
{{- end }}
{{- end -}}

{{/* Scheduling values of a component: include with the component's values. */}}
{{- define "tokenvault.scheduling" -}}
{{- with .priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with .nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* The environment every tokenvault process shares. */}}
{{- define "tokenvault.commonEnv" -}}
- name: TOKENVAULT_HOST
  value: "0.0.0.0"
- name: TOKENVAULT_PORT
  value: "8080"
- name: TOKENVAULT_LOG_LEVEL
  value: {{ .Values.config.logLevel | quote }}
{{- end -}}

{{/* Reactor limits and outbound settings (api and worker). */}}
{{- define "tokenvault.runtimeEnv" -}}
- name: TOKENVAULT_REACTOR_CPU_MS
  value: {{ .Values.config.reactor.cpuMs | int64 | quote }}
- name: TOKENVAULT_REACTOR_TIMEOUT_MS
  value: {{ .Values.config.reactor.timeoutMs | int64 | quote }}
- name: TOKENVAULT_REACTOR_MEMORY_MB
  value: {{ .Values.config.reactor.memoryMb | int64 | quote }}
- name: TOKENVAULT_REACTOR_RESULT_LIMIT_BYTES
  value: {{ .Values.config.reactor.resultLimitBytes | int64 | quote }}
- name: TOKENVAULT_SANDBOX_HOST_LIMIT_BYTES
  value: {{ .Values.config.reactor.hostLimitBytes | int64 | quote }}
{{- with .Values.config.outbound.allowedHosts }}
- name: TOKENVAULT_PROXY_ALLOWED_HOSTS
  value: {{ join "," . | quote }}
{{- end }}
{{- if .Values.config.outbound.caBundle.configMapName }}
- name: TOKENVAULT_PROXY_CA_FILE
  value: /etc/tokenvault/outbound-ca/{{ .Values.config.outbound.caBundle.key }}
{{- end }}
{{- end -}}

{{- define "tokenvault.outboundCaVolumeMount" -}}
{{- if .Values.config.outbound.caBundle.configMapName }}
- name: outbound-ca
  mountPath: /etc/tokenvault/outbound-ca
  readOnly: true
{{- end }}
{{- end -}}

{{- define "tokenvault.outboundCaVolume" -}}
{{- if .Values.config.outbound.caBundle.configMapName }}
- name: outbound-ca
  configMap:
    name: {{ .Values.config.outbound.caBundle.configMapName }}
    items:
      - key: {{ .Values.config.outbound.caBundle.key }}
        path: {{ .Values.config.outbound.caBundle.key }}
{{- end }}
{{- end -}}

{{/* HTTP probes on the process's port (every process answers /healthz and /readyz). */}}
{{- define "tokenvault.probes" -}}
startupProbe:
  httpGet:
    path: /healthz
    port: http
  periodSeconds: 2
  failureThreshold: 60
livenessProbe:
  httpGet:
    path: /healthz
    port: http
  periodSeconds: 10
  timeoutSeconds: 5
  failureThreshold: 3
readinessProbe:
  httpGet:
    path: /readyz
    port: http
  periodSeconds: 5
  timeoutSeconds: 5
  failureThreshold: 2
{{- end -}}

{{/* Pod annotations: the user's, and checksum/keys, a hash of the key Secrets and CA bundle the processes read at
start (mounted files are updated in place, but read once), so that an upgrade after they changed (a KEK rotation, a
new worker secret, an edited existingSecret or CA bundle) rolls the pods. Taken from the cluster (lookup), so it is
absent on the first install and an offline render: the first upgrade after an install rolls the pods once. Include
with (dict "ctx" $ "annotations" .Values.api.podAnnotations). */}}
{{- define "tokenvault.podAnnotations" -}}
{{- $ctx := .ctx -}}
{{- $ns := $ctx.Release.Namespace -}}
{{- $seen := list -}}
{{- range $name := list (include "tokenvault.kek.secretName" $ctx) (include "tokenvault.operatorKey.secretName" $ctx) (include "tokenvault.workerSecret.secretName" $ctx) -}}
{{- with lookup "v1" "Secret" $ns $name -}}{{- $seen = append $seen (.data | toJson) -}}{{- end -}}
{{- end -}}
{{- with $ctx.Values.config.outbound.caBundle.configMapName -}}
{{- with lookup "v1" "ConfigMap" $ns . -}}{{- $seen = append $seen (.data | toJson) -}}{{- end -}}
{{- end -}}
{{- if or $seen .annotations }}
annotations:
  {{- if $seen }}
  checksum/keys: {{ join "\n" $seen | sha256sum | quote }}
  {{- end }}
  {{- with .annotations }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- end }}
{{- end -}}

{{/* A container's resources, with an ephemeral-storage request (ephemeralStorageRequest) unless they name one: the
scheduler then counts the logs and emptyDirs each pod writes on its node, and eviction picks the pods that use more.
Include with (dict "ctx" $ "resources" .Values.api.resources). */}}
{{- define "tokenvault.resources" -}}
{{- $resources := deepCopy (.resources | default dict) -}}
{{- with .ctx.Values.ephemeralStorageRequest -}}
{{- $requests := $resources.requests | default dict -}}
{{- if not (hasKey $requests "ephemeral-storage") -}}
{{- $_ := set $requests "ephemeral-storage" . -}}
{{- end -}}
{{- $_ := set $resources "requests" $requests -}}
{{- end -}}
{{- toYaml $resources -}}
{{- end -}}
