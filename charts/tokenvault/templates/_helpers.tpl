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
{{- if and (include "tokenvault.etcd.enabled" .) .Values.etcd.tls.enabled -}}true{{- end -}}
{{- end -}}

{{/* The store: etcd (the default, as before store.type existed) or postgres. */}}
{{- define "tokenvault.store.type" -}}
{{- (.Values.store | default dict).type | default "etcd" -}}
{{- end -}}

{{- define "tokenvault.store.postgres" -}}
{{- if eq (include "tokenvault.store.type" .) "postgres" -}}true{{- end -}}
{{- end -}}

{{/* Whether the chart runs etcd: etcd.enabled, and only with the etcd store (with postgres, no etcd object at all). */}}
{{- define "tokenvault.etcd.enabled" -}}
{{- if and (not (include "tokenvault.store.postgres" .)) .Values.etcd.enabled -}}true{{- end -}}
{{- end -}}

{{/* The CloudNativePG Cluster the chart renders (store.postgres.cloudnativepg), its Services and Secrets. */}}
{{- define "tokenvault.postgres.cnpg" -}}
{{- if and (include "tokenvault.store.postgres" .) .Values.store.postgres.cloudnativepg.enabled -}}true{{- end -}}
{{- end -}}
{{- define "tokenvault.postgres.clusterName" -}}{{ include "tokenvault.fullname" . }}-postgres{{- end -}}

{{/* A {name, key} Secret reference is set when both are. */}}
{{- define "tokenvault.secretRefSet" -}}
{{- if and . .name .key -}}true{{- end -}}
{{- end -}}

{{/*
How the API reaches PostgreSQL, as JSON (fromJson): url (a value: never with a password) or urlSecretRef, and the
optional passwordSecretRef and caSecretRef ({name, key}). With cloudnativepg: the URL of the Cluster's -rw Service
(verify-full against its server certificate, whose names include <cluster>-rw.<namespace>.svc), the owner's password
from the <cluster>-app Secret CNPG makes (key password, as a file: the Secret's uri key carries it in clear and no
sslmode), and CNPG's server CA from <cluster>-ca (key ca.crt). Refuses, with what to set, an incomplete configuration.
*/}}
{{- define "tokenvault.postgres.connection" -}}
{{- $pg := .Values.store.postgres -}}
{{- $out := dict -}}
{{- $hasUrlRef := include "tokenvault.secretRefSet" $pg.urlSecretRef -}}
{{- if include "tokenvault.postgres.cnpg" . -}}
{{- if or $hasUrlRef $pg.host -}}
{{- fail "store.postgres.cloudnativepg.enabled: the chart connects the API to the Cluster it renders; leave store.postgres.urlSecretRef and store.postgres.host empty (or turn cloudnativepg off to use your own database)" -}}
{{- end -}}
{{- $cluster := include "tokenvault.postgres.clusterName" . -}}
{{- $_ := set $out "url" (printf "postgres://tokenvault@%s-rw.%s.svc:5432/tokenvault?sslmode=verify-full" $cluster .Release.Namespace) -}}
{{- $_ := set $out "passwordSecretRef" (dict "name" (printf "%s-app" $cluster) "key" "password") -}}
{{- $_ := set $out "caSecretRef" (dict "name" (printf "%s-ca" $cluster) "key" "ca.crt") -}}
{{- else -}}
{{- if $hasUrlRef -}}
{{- $_ := set $out "urlSecretRef" (dict "name" $pg.urlSecretRef.name "key" $pg.urlSecretRef.key) -}}
{{- else if and $pg.host $pg.database $pg.user -}}
{{- $sslmode := $pg.sslmode | default "verify-full" -}}
{{- $_ := set $out "url" (printf "postgres://%s@%s:%d/%s?sslmode=%s" $pg.user $pg.host (int ($pg.port | default 5432)) $pg.database $sslmode) -}}
{{- if and (include "tokenvault.secretRefSet" $pg.caSecretRef) (not (has $sslmode (list "verify-ca" "verify-full"))) -}}
{{- fail (printf "store.postgres.caSecretRef is read only with sslmode verify-ca or verify-full (store.postgres.sslmode is %s)" $sslmode) -}}
{{- end -}}
{{- else -}}
{{- fail "store.type=postgres: set store.postgres.urlSecretRef ({name, key} of a Secret holding the whole postgres:// URL), or store.postgres.host, .database and .user (with .passwordSecretRef for the password), or store.postgres.cloudnativepg.enabled=true" -}}
{{- end -}}
{{- range $ref := list "passwordSecretRef" "caSecretRef" -}}
{{- if include "tokenvault.secretRefSet" (index $pg $ref) -}}
{{- $_ := set $out $ref (dict "name" (index $pg $ref).name "key" (index $pg $ref).key) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- toJson $out -}}
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
or the external endpoints; with postgres, the URL (never a password: that is a file) or where it comes from. */}}
{{- define "tokenvault.store" -}}
{{- if include "tokenvault.store.postgres" . -}}
{{- $connection := include "tokenvault.postgres.connection" . | fromJson -}}
{{- if $connection.url -}}
{{- $connection.url -}}
{{- else -}}
{{- printf "postgres:// from Secret %s, key %s" $connection.urlSecretRef.name $connection.urlSecretRef.key -}}
{{- end -}}
{{- else if .Values.etcd.enabled -}}
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
with (dict "ctx" $ "annotations" .Values.api.podAnnotations), and "secrets" for more Secrets a process reads at start
(the API's PostgreSQL URL and CA). */}}
{{- define "tokenvault.podAnnotations" -}}
{{- $ctx := .ctx -}}
{{- $ns := $ctx.Release.Namespace -}}
{{- $seen := list -}}
{{- range $name := concat (list (include "tokenvault.kek.secretName" $ctx) (include "tokenvault.operatorKey.secretName" $ctx) (include "tokenvault.workerSecret.secretName" $ctx)) (.secrets | default list) -}}
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
