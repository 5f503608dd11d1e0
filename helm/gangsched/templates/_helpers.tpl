{{/*
Names, labels, addresses and the pieces every workload shares: the
security contexts, the TLS and auth flags and mounts, the shim's container
(used by its Deployment and by the sidecar values in NOTES.txt).
*/}}

{{- define "gangsched.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "gangsched.fullname" -}}
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

{{- define "gangsched.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "gangsched.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "gangsched.selectorLabels" -}}
app.kubernetes.io/name: {{ include "gangsched.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* Selector labels of one component: core, frontend or kuberay. */}}
{{- define "gangsched.componentSelector" -}}
{{ include "gangsched.selectorLabels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "gangsched.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{- define "gangsched.serverServiceAccount" -}}
{{ include "gangsched.fullname" . }}
{{- end }}

{{- define "gangsched.shimServiceAccount" -}}
{{- if eq .Values.shim.mode "sidecar" }}
{{- .Values.shim.sidecar.serviceAccountName }}
{{- else }}
{{- default (printf "%s-kuberay" (include "gangsched.fullname" .)) .Values.shim.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* Where the shim runs: its Lease and Secrets live there. */}}
{{- define "gangsched.shimNamespace" -}}
{{- if eq .Values.shim.mode "sidecar" }}
{{- default .Release.Namespace .Values.shim.sidecar.namespace }}
{{- else }}
{{- .Release.Namespace }}
{{- end }}
{{- end }}

{{- define "gangsched.leaseName" -}}
{{- default (printf "%s-kuberay" (include "gangsched.fullname" .)) .Values.shim.leaseName }}
{{- end }}

{{- define "gangsched.headlessService" -}}
{{ include "gangsched.fullname" . }}-headless
{{- end }}

{{/* The gRPC Service's fully qualified name: what clients dial. */}}
{{- define "gangsched.grpcHost" -}}
{{ include "gangsched.fullname" . }}.{{ .Release.Namespace }}.svc.{{ .Values.clusterDomain }}
{{- end }}

{{/* Each core pod's stable name and port, comma separated (--core). */}}
{{- define "gangsched.coreAddresses" -}}
{{- $fullname := include "gangsched.fullname" . }}
{{- $headless := include "gangsched.headlessService" . }}
{{- $addresses := list }}
{{- range $i := until (int .Values.ha.cores) }}
{{- $addresses = append $addresses (printf "%s-core-%d.%s.%s.svc.%s:%d" $fullname $i $headless $.Release.Namespace $.Values.clusterDomain (int $.Values.server.grpcPort)) }}
{{- end }}
{{- join "," $addresses }}
{{- end }}

{{- define "gangsched.etcdEndpoints" -}}
{{- $endpoints := list }}
{{- range .Values.etcd.endpoints }}
{{- $endpoints = append $endpoints (tpl . $) }}
{{- end }}
{{- required "etcd.endpoints: ha.enabled needs the etcd cluster's host:port list; gangsched does not deploy etcd (helm/gangsched/README.md, \"Running etcd\")" (join "," $endpoints) }}
{{- end }}

{{- define "gangsched.etcdPrefix" -}}
{{- default (printf "/gangsched/%s/%s" .Release.Namespace (include "gangsched.fullname" .)) .Values.etcd.prefix }}
{{- end }}

{{/* Refuses values that cannot work, before anything is rendered. */}}
{{- define "gangsched.validate" -}}
{{- if .Values.tls.enabled }}
{{- $_ := required "tls.secretName: tls.enabled needs a kubernetes.io/tls Secret with tls.crt, tls.key and ca.crt" .Values.tls.secretName }}
{{- else if .Values.tls.clientAuth }}
{{- fail "tls.clientAuth needs tls.enabled (mTLS is TLS)" }}
{{- end }}
{{- if .Values.auth.enabled }}
{{- $_ := required "auth.tokensSecret: auth.enabled needs a Secret with the key tokens.yaml" .Values.auth.tokensSecret }}
{{- end }}
{{- if not (has .Values.shim.mode (list "deployment" "sidecar")) }}
{{- fail (printf "shim.mode: %q is neither deployment nor sidecar" .Values.shim.mode) }}
{{- end }}
{{- if .Values.shim.enabled }}
{{- if and .Values.auth.enabled (not .Values.tls.clientAuth) }}
{{- $_ := required "shim.tokenSecret: with auth.enabled the shim needs a Secret with its token (key token)" .Values.shim.tokenSecret }}
{{- end }}
{{- if .Values.tls.clientAuth }}
{{- $_ := required "shim.tls.secretName: with tls.clientAuth the shim needs its client certificate (a Secret with tls.crt, tls.key, ca.crt)" .Values.shim.tls.secretName }}
{{- end }}
{{- end }}
{{- if and .Values.monitoring.enabled .Values.auth.enabled }}
{{- $_ := required "monitoring.serviceMonitor.tokenSecret.name: with auth.enabled Prometheus needs a viewer token" .Values.monitoring.serviceMonitor.tokenSecret.name }}
{{- end }}
{{- if and .Values.monitoring.enabled .Values.tls.clientAuth }}
{{- $_ := required "monitoring.serviceMonitor.clientCertSecret: with tls.clientAuth the metrics port asks Prometheus for a client certificate" .Values.monitoring.serviceMonitor.clientCertSecret }}
{{- end }}
{{- if and .Values.ha.enabled (lt (int .Values.ha.cores) 1) }}
{{- fail "ha.cores: at least 1" }}
{{- end }}
{{- end }}

{{/* The pod-level settings every pod of the chart shares. */}}
{{- define "gangsched.podCommon" -}}
{{- with .root.Values.imagePullSecrets }}
imagePullSecrets:
{{- range . }}
  - name: {{ . }}
{{- end }}
{{- end }}
securityContext:
  {{- toYaml .root.Values.podSecurityContext | nindent 2 }}
{{- with .values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with .values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
affinity:
{{- if .values.affinity }}
  {{- toYaml .values.affinity | nindent 2 }}
{{- else }}
  podAntiAffinity:
    preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 100
        podAffinityTerm:
          topologyKey: kubernetes.io/hostname
          labelSelector:
            matchLabels:
              {{- include "gangsched.componentSelector" (dict "root" .root "component" .component) | nindent 14 }}
{{- end }}
{{- end }}

{{- define "gangsched.containerSecurityContext" -}}
{{ toYaml .Values.containerSecurityContext }}
{{- end }}

{{/* Server flags shared by cores and frontends: listeners, TLS, auth. */}}
{{- define "gangsched.serverSecurityArgs" -}}
- --metrics-listen=0.0.0.0:{{ .Values.server.metricsPort }}
- --health-listen=0.0.0.0:{{ .Values.server.healthPort }}
- --reload-poll-seconds={{ .Values.server.reloadPollSeconds }}
{{- if .Values.tls.enabled }}
- --tls-cert=/etc/gangsched/tls/tls.crt
- --tls-key=/etc/gangsched/tls/tls.key
{{- if .Values.tls.clientAuth }}
- --tls-client-ca=/etc/gangsched/tls/ca.crt
{{- end }}
{{- end }}
{{- if .Values.auth.enabled }}
- --auth-tokens=/etc/gangsched/auth/tokens.yaml
{{- end }}
{{- if not (or .Values.auth.enabled .Values.tls.clientAuth) }}
- --insecure-listen-any
{{- end }}
- --log-level={{ .Values.server.logLevel }}
- --log-format={{ .Values.server.logFormat }}
{{- end }}

{{- define "gangsched.serverPorts" -}}
- name: grpc
  containerPort: {{ .Values.server.grpcPort }}
  protocol: TCP
- name: metrics
  containerPort: {{ .Values.server.metricsPort }}
  protocol: TCP
- name: health
  containerPort: {{ .Values.server.healthPort }}
  protocol: TCP
{{- end }}

{{- define "gangsched.securityMounts" -}}
{{- if .Values.tls.enabled }}
- name: tls
  mountPath: /etc/gangsched/tls
  readOnly: true
{{- end }}
{{- if .Values.auth.enabled }}
- name: auth
  mountPath: /etc/gangsched/auth
  readOnly: true
{{- end }}
{{- end }}

{{- define "gangsched.securityVolumes" -}}
{{- if .Values.tls.enabled }}
- name: tls
  secret:
    secretName: {{ .Values.tls.secretName }}
{{- end }}
{{- if .Values.auth.enabled }}
- name: auth
  secret:
    secretName: {{ .Values.auth.tokensSecret }}
{{- end }}
{{- end }}

{{/* The shim's flags. */}}
{{- define "gangsched.shimArgs" -}}
- --gangsched={{ include "gangsched.grpcHost" . }}:{{ .Values.server.grpcPort }}
- --metrics-listen=:{{ .Values.shim.metricsPort }}
- --scheduler-name={{ .Values.shim.schedulerName }}
- --default-queue={{ .Values.shim.defaultQueue }}
- --leader-election=true
- --lease-name={{ include "gangsched.leaseName" . }}
- --lease-duration={{ .Values.shim.leaseDurationSeconds }}
- --log-format={{ .Values.shim.logFormat }}
{{- range .Values.shim.namespaces }}
- --namespace={{ . }}
{{- end }}
{{- range .Values.shim.tolerateTaints }}
- --tolerate-taint={{ . }}
{{- end }}
{{- if .Values.tls.enabled }}
- --tls-ca=/etc/gangsched/tls/ca.crt
{{- if .Values.tls.clientAuth }}
- --tls-cert=/etc/gangsched/tls/tls.crt
- --tls-key=/etc/gangsched/tls/tls.key
{{- end }}
{{- with .Values.shim.tls.serverName }}
- --tls-server-name={{ . }}
{{- end }}
{{- end }}
{{- if .Values.shim.tokenSecret }}
- --token-file=/etc/gangsched/token/token
{{- end }}
{{- with .Values.shim.extraArgs }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* The shim's container: its Deployment's, and the sidecar's. */}}
{{- define "gangsched.shimContainer" -}}
name: gangsched-kuberay
image: {{ include "gangsched.image" . }}
imagePullPolicy: {{ .Values.image.pullPolicy }}
command: [gangsched-kuberay]
args:
  {{- include "gangsched.shimArgs" . | nindent 2 }}
env:
  - name: POD_NAMESPACE
    valueFrom:
      fieldRef:
        fieldPath: metadata.namespace
ports:
  - name: shim-metrics
    containerPort: {{ .Values.shim.metricsPort }}
    protocol: TCP
readinessProbe:
  httpGet:
    path: /metrics
    port: {{ .Values.shim.metricsPort }}
  periodSeconds: 10
livenessProbe:
  httpGet:
    path: /metrics
    port: {{ .Values.shim.metricsPort }}
  periodSeconds: 20
  failureThreshold: 3
resources:
  {{- toYaml .Values.shim.resources | nindent 2 }}
securityContext:
  {{- include "gangsched.containerSecurityContext" . | nindent 2 }}
volumeMounts:
  - name: shim-tmp
    mountPath: /tmp
{{- if .Values.tls.enabled }}
  - name: shim-tls
    mountPath: /etc/gangsched/tls
    readOnly: true
{{- end }}
{{- if .Values.shim.tokenSecret }}
  - name: shim-token
    mountPath: /etc/gangsched/token
    readOnly: true
{{- end }}
{{- end }}

{{/* The volumes the shim's container mounts. */}}
{{- define "gangsched.shimVolumes" -}}
- name: shim-tmp
  emptyDir: {}
{{- if .Values.tls.enabled }}
- name: shim-tls
  secret:
{{- if .Values.shim.tls.secretName }}
    secretName: {{ .Values.shim.tls.secretName }}
{{- else }}
    # Only the CA of the server's Secret: the shim never sees its key.
    secretName: {{ .Values.tls.secretName }}
    items:
      - key: ca.crt
        path: ca.crt
{{- end }}
{{- end }}
{{- if .Values.shim.tokenSecret }}
- name: shim-token
  secret:
    secretName: {{ .Values.shim.tokenSecret }}
    items:
      - key: token
        path: token
{{- end }}
{{- end }}
