{{/*
Expand the name of the chart.
*/}}
{{- define "oncekey.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Create a default fully qualified app name, truncated to 63 characters (DNS label limit).
If the release name contains the chart name it is used as the full name.
*/}}
{{- define "oncekey.fullname" -}}
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

{{/*
Chart name and version as used by the chart label.
*/}}
{{- define "oncekey.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Common labels.
*/}}
{{- define "oncekey.labels" -}}
helm.sh/chart: {{ include "oncekey.chart" . }}
{{ include "oncekey.selectorLabels" . }}
{{- if .Chart.AppVersion }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: oncekey
{{- end }}

{{/*
Selector labels.
*/}}
{{- define "oncekey.selectorLabels" -}}
app.kubernetes.io/name: {{ include "oncekey.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/*
Selector labels of the server pods (the migration Job and test pods carry another component).
*/}}
{{- define "oncekey.serverSelectorLabels" -}}
{{ include "oncekey.selectorLabels" . }}
app.kubernetes.io/component: server
{{- end }}

{{/*
Name of the ServiceAccount the server pods use.
*/}}
{{- define "oncekey.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "oncekey.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
The image reference: [global.imageRegistry/]repository plus digest, else tag (default: the
chart's appVersion).
*/}}
{{- define "oncekey.image" -}}
{{- $repository := .Values.image.repository }}
{{- with (.Values.global).imageRegistry }}
{{- $repository = printf "%s/%s" (trimSuffix "/" .) $repository }}
{{- end }}
{{- if .Values.image.digest }}
{{- printf "%s@%s" $repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" $repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/*
Pull secrets: global.imagePullSecrets, then imagePullSecrets.
*/}}
{{- define "oncekey.imagePullSecrets" -}}
{{- $secrets := concat ((.Values.global).imagePullSecrets | default list) .Values.imagePullSecrets }}
{{- with $secrets -}}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/*
Resources of the server container: with the embedded store, the memory request is the limit.
*/}}
{{- define "oncekey.resources" -}}
{{- $resources := deepCopy .Values.resources }}
{{- if include "oncekey.embedded" . }}
{{- $memory := ($resources.limits | default dict).memory }}
{{- $requests := $resources.requests | default dict }}
{{- $_ := set $requests "memory" $memory }}
{{- $_ := set $resources "requests" $requests }}
{{- end }}
{{- toYaml $resources }}
{{- end }}

{{/*
Whether the embedded store is chosen ("true" or "").
*/}}
{{- define "oncekey.embedded" -}}
{{- if eq .Values.store.type "embedded" }}true{{ end }}
{{- end }}

{{/*
Name of the chart-managed Secret (tokens file and CQL credentials).
*/}}
{{- define "oncekey.secretName" -}}
{{- include "oncekey.fullname" . }}
{{- end }}

{{/*
Whether the server reads a tokens file ("true" or "").
*/}}
{{- define "oncekey.usesTokens" -}}
{{- if not .Values.auth.allowUnauthenticated }}true{{ end }}
{{- end }}

{{/*
Secret holding the tokens file.
*/}}
{{- define "oncekey.tokensSecretName" -}}
{{- default (include "oncekey.secretName" .) .Values.auth.existingSecret }}
{{- end }}

{{/*
Key of the tokens file in its Secret.
*/}}
{{- define "oncekey.tokensKey" -}}
{{- if .Values.auth.existingSecret }}{{ .Values.auth.existingSecretKey }}{{ else }}tokens{{ end }}
{{- end }}

{{/*
Whether the server authenticates to CQL ("true" or "").
*/}}
{{- define "oncekey.cqlAuth" -}}
{{- if and (not (include "oncekey.embedded" .)) (or .Values.cql.existingSecret .Values.cql.username) }}true{{ end }}
{{- end }}

{{/*
Secret holding the CQL credentials, and its keys.
*/}}
{{- define "oncekey.cqlSecretName" -}}
{{- default (include "oncekey.secretName" .) .Values.cql.existingSecret }}
{{- end }}
{{- define "oncekey.cqlUsernameKey" -}}
{{- if .Values.cql.existingSecret }}{{ .Values.cql.usernameKey }}{{ else }}cql-username{{ end }}
{{- end }}
{{- define "oncekey.cqlPasswordKey" -}}
{{- if .Values.cql.existingSecret }}{{ .Values.cql.passwordKey }}{{ else }}cql-password{{ end }}
{{- end }}

{{/*
Whether the chart creates its own Secret ("true" or "").
*/}}
{{- define "oncekey.createSecret" -}}
{{- $tokens := and (include "oncekey.usesTokens" .) (not .Values.auth.existingSecret) }}
{{- $cql := and (include "oncekey.cqlAuth" .) (not .Values.cql.existingSecret) }}
{{- if or $tokens $cql }}true{{ end }}
{{- end }}

{{/*
The CQL credential environment variables (server and migration Job).
*/}}
{{- define "oncekey.cqlCredentialsEnv" -}}
{{- if include "oncekey.cqlAuth" . }}
- name: ONCEKEY_CQL_USERNAME
  valueFrom:
    secretKeyRef:
      name: {{ include "oncekey.cqlSecretName" . }}
      key: {{ include "oncekey.cqlUsernameKey" . }}
- name: ONCEKEY_CQL_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ include "oncekey.cqlSecretName" . }}
      key: {{ include "oncekey.cqlPasswordKey" . }}
{{- end }}
{{- end }}

{{/*
Seconds the kubelet waits after SIGTERM: above preStop sleep + drain timeout.
*/}}
{{- define "oncekey.terminationGracePeriodSeconds" -}}
{{- $floor := add .Values.preStopSleepSeconds .Values.server.drainTimeoutSeconds }}
{{- if .Values.terminationGracePeriodSeconds }}
{{- if le (int .Values.terminationGracePeriodSeconds) (int $floor) }}
{{- fail (printf "terminationGracePeriodSeconds (%d) must exceed preStopSleepSeconds + server.drainTimeoutSeconds (%d), or the kubelet kills pods mid-drain" (int .Values.terminationGracePeriodSeconds) (int $floor)) }}
{{- end }}
{{- .Values.terminationGracePeriodSeconds }}
{{- else }}
{{- add $floor 15 }}
{{- end }}
{{- end }}

{{/*
The pod template shared by the Deployment (cql) and the StatefulSet (embedded).
*/}}
{{- define "oncekey.podTemplate" -}}
metadata:
  labels:
    {{- include "oncekey.labels" . | nindent 4 }}
    app.kubernetes.io/component: server
    {{- with .Values.podLabels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  annotations:
    checksum/config: {{ include (print $.Template.BasePath "/configmap.yaml") . | sha256sum }}
    {{- if include "oncekey.createSecret" . }}
    checksum/secret: {{ include (print $.Template.BasePath "/secret.yaml") . | sha256sum }}
    {{- end }}
    {{- with .Values.podAnnotations }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  serviceAccountName: {{ include "oncekey.serviceAccountName" . }}
  automountServiceAccountToken: {{ .Values.serviceAccount.automountServiceAccountToken }}
  {{- with include "oncekey.imagePullSecrets" . }}
{{- . | nindent 2 }}
{{- end }}
  {{- with .Values.priorityClassName }}
  priorityClassName: {{ . }}
  {{- end }}
  terminationGracePeriodSeconds: {{ include "oncekey.terminationGracePeriodSeconds" . }}
  securityContext:
    {{- toYaml .Values.podSecurityContext | nindent 4 }}
  {{- with .Values.initContainers }}
  initContainers:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  containers:
    - name: oncekey
      image: {{ include "oncekey.image" . | quote }}
      imagePullPolicy: {{ .Values.image.pullPolicy }}
      args: ["serve"]
      ports:
        - name: grpc
          containerPort: 50051
          protocol: TCP
        - name: admin
          containerPort: 9090
          protocol: TCP
      envFrom:
        - configMapRef:
            name: {{ include "oncekey.fullname" . }}
      {{- if or (include "oncekey.cqlAuth" .) .Values.extraEnv }}
      env:
        {{- include "oncekey.cqlCredentialsEnv" . | trim | nindent 8 }}
        {{- with .Values.extraEnv }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      {{- end }}
      {{- with .Values.startupProbe }}
      startupProbe:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .Values.livenessProbe }}
      livenessProbe:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .Values.readinessProbe }}
      readinessProbe:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- if gt (int .Values.preStopSleepSeconds) 0 }}
      lifecycle:
        preStop:
          sleep:
            seconds: {{ .Values.preStopSleepSeconds }}
      {{- end }}
      resources:
        {{- include "oncekey.resources" . | nindent 8 }}
      securityContext:
        {{- toYaml .Values.securityContext | nindent 8 }}
      volumeMounts:
        - name: tmp
          mountPath: /tmp
        {{- if include "oncekey.embedded" . }}
        - name: data
          mountPath: /var/lib/oncekey
        {{- end }}
        {{- if include "oncekey.usesTokens" . }}
        - name: tokens
          mountPath: /etc/oncekey/tokens
          readOnly: true
        {{- end }}
        {{- if .Values.tls.enabled }}
        - name: tls
          mountPath: /etc/oncekey/tls
          readOnly: true
        {{- if .Values.tls.clientAuth }}
        - name: tls-client-ca
          mountPath: /etc/oncekey/tls-client-ca
          readOnly: true
        {{- end }}
        {{- end }}
        {{- if .Values.server.encryption.existingSecret }}
        - name: encryption-keys
          mountPath: /etc/oncekey/encryption
          readOnly: true
        {{- end }}
        {{- include "oncekey.cqlTlsMounts" . | nindent 8 }}
        {{- with .Values.extraVolumeMounts }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
    {{- with .Values.sidecars }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  volumes:
    - name: tmp
      emptyDir:
        sizeLimit: 64Mi
    {{- if and (include "oncekey.embedded" .) (not .Values.persistence.enabled) }}
    - name: data
      emptyDir: {}
    {{- end }}
    {{- if include "oncekey.usesTokens" . }}
    - name: tokens
      secret:
        secretName: {{ include "oncekey.tokensSecretName" . }}
        defaultMode: 0440
        items:
          - key: {{ include "oncekey.tokensKey" . }}
            path: tokens
    {{- end }}
    {{- if .Values.tls.enabled }}
    - name: tls
      secret:
        secretName: {{ .Values.tls.existingSecret }}
        defaultMode: 0440
        items:
          - key: tls.crt
            path: tls.crt
          - key: tls.key
            path: tls.key
    {{- if .Values.tls.clientAuth }}
    - name: tls-client-ca
      secret:
        secretName: {{ default .Values.tls.existingSecret .Values.tls.clientCaSecret }}
        defaultMode: 0440
        items:
          - key: {{ .Values.tls.clientCaKey }}
            path: ca.crt
    {{- end }}
    {{- end }}
    {{- with .Values.server.encryption.existingSecret }}
    - name: encryption-keys
      secret:
        secretName: {{ . }}
        defaultMode: 0440
        items:
          - key: {{ $.Values.server.encryption.key }}
            path: keyring
    {{- end }}
    {{- include "oncekey.cqlTlsVolumes" . | nindent 4 }}
    {{- with .Values.extraVolumes }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- with .Values.nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.affinity }}
  affinity:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- if not (include "oncekey.embedded" .) }}
  topologySpreadConstraints:
    {{- if .Values.topologySpreadConstraints }}
    {{- toYaml .Values.topologySpreadConstraints | nindent 4 }}
    {{- else }}
    - maxSkew: 1
      topologyKey: kubernetes.io/hostname
      whenUnsatisfiable: ScheduleAnyway
      labelSelector:
        matchLabels:
          {{- include "oncekey.serverSelectorLabels" . | nindent 10 }}
    - maxSkew: 1
      topologyKey: topology.kubernetes.io/zone
      whenUnsatisfiable: ScheduleAnyway
      labelSelector:
        matchLabels:
          {{- include "oncekey.serverSelectorLabels" . | nindent 10 }}
    {{- end }}
  {{- end }}
{{- end }}
