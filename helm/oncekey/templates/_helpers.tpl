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
{{- with $secrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/*
A duration value (500ms, 30s, 5m, 24h, 30d, or bare seconds) in milliseconds, as the server
parses it.
*/}}
{{- define "oncekey.durationMs" -}}
{{- $text := toString . }}
{{- $digits := regexFind "^[0-9]+" $text }}
{{- $scale := get (dict "ms" 1 "" 1000 "s" 1000 "m" 60000 "h" 3600000 "d" 86400000) (trimPrefix $digits $text) }}
{{- mul (int64 $digits) $scale }}
{{- end }}

{{/*
A memory quantity (512Mi, 1Gi, 1G, 1073741824) in whole MiB; fails on other forms.
*/}}
{{- define "oncekey.memoryMiB" -}}
{{- $text := toString . }}
{{- $number := regexFind "^[0-9]+(\\.[0-9]+)?" $text }}
{{- $units := dict "" 1.0 "Ki" 1024.0 "Mi" 1048576.0 "Gi" 1073741824.0 "Ti" 1099511627776.0 "k" 1000.0 "M" 1000000.0 "G" 1000000000.0 "T" 1000000000000.0 }}
{{- $unit := trimPrefix $number $text }}
{{- if or (not $number) (not (hasKey $units $unit)) }}
{{- fail (printf "resources.limits.memory %q: give a quantity like 512Mi or 1Gi" $text) }}
{{- end }}
{{- divf (mulf (float64 $number) (get $units $unit)) 1048576.0 | floor | int64 }}
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
Whether the server talks TLS to the CQL nodes ("true" or "").
*/}}
{{- define "oncekey.cqlTls" -}}
{{- if and (not (include "oncekey.embedded" .)) .Values.cql.tls.enabled }}true{{ end }}
{{- end }}

{{/*
Environment of the CQL TLS settings (server ConfigMap entries and the migration Job's env),
as a dict of name → value.
*/}}
{{- define "oncekey.cqlTlsEnv" -}}
{{- $env := dict }}
{{- if include "oncekey.cqlTls" . }}
{{- $tls := .Values.cql.tls }}
{{- $_ := set $env "ONCEKEY_CQL_TLS" "true" }}
{{- if or $tls.caConfigMap $tls.caSecret }}
{{- $_ := set $env "ONCEKEY_CQL_TLS_CA" "/etc/oncekey/cql-tls-ca/ca.crt" }}
{{- end }}
{{- if $tls.clientCertSecret }}
{{- $_ := set $env "ONCEKEY_CQL_TLS_CERT" "/etc/oncekey/cql-tls-client/tls.crt" }}
{{- $_ := set $env "ONCEKEY_CQL_TLS_KEY" "/etc/oncekey/cql-tls-client/tls.key" }}
{{- end }}
{{- with $tls.serverName }}
{{- $_ := set $env "ONCEKEY_CQL_TLS_SERVER_NAME" . }}
{{- end }}
{{- end }}
{{- toYaml $env }}
{{- end }}

{{/*
Volumes and mounts of the CQL TLS files (server pods and the migration Job).
*/}}
{{- define "oncekey.cqlTlsVolumes" -}}
{{- if include "oncekey.cqlTls" . }}
{{- $tls := .Values.cql.tls }}
{{- if $tls.caConfigMap }}
- name: cql-tls-ca
  configMap:
    name: {{ $tls.caConfigMap }}
    items:
      - key: {{ $tls.caKey }}
        path: ca.crt
{{- else if $tls.caSecret }}
- name: cql-tls-ca
  secret:
    secretName: {{ $tls.caSecret }}
    defaultMode: 0440
    items:
      - key: {{ $tls.caKey }}
        path: ca.crt
{{- end }}
{{- with $tls.clientCertSecret }}
- name: cql-tls-client
  secret:
    secretName: {{ . }}
    defaultMode: 0440
    items:
      - key: tls.crt
        path: tls.crt
      - key: tls.key
        path: tls.key
{{- end }}
{{- end }}
{{- end }}
{{- define "oncekey.cqlTlsMounts" -}}
{{- if include "oncekey.cqlTls" . }}
{{- if or .Values.cql.tls.caConfigMap .Values.cql.tls.caSecret }}
- name: cql-tls-ca
  mountPath: /etc/oncekey/cql-tls-ca
  readOnly: true
{{- end }}
{{- if .Values.cql.tls.clientCertSecret }}
- name: cql-tls-client
  mountPath: /etc/oncekey/cql-tls-client
  readOnly: true
{{- end }}
{{- end }}
{{- end }}

{{/*
The bearer token of `helm test`, made by the chart (tests.generateToken): kept from the chart's
Secret when it exists, else new. "" when the chart makes none.
*/}}
{{- define "oncekey.testToken" -}}
{{- if and .Values.tests.enabled .Values.tests.generateToken (not .Values.tests.tokenSecret) (include "oncekey.usesTokens" .) (not .Values.auth.existingSecret) }}
{{- $existing := lookup "v1" "Secret" .Release.Namespace (include "oncekey.secretName" .) }}
{{- $kept := (($existing).data | default dict) | dig "helm-test-token" "" | b64dec }}
{{- $kept | default (randAlphaNum 43) }}
{{- end }}
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
Cross-field checks the schema cannot express clearly; called from the workload templates.
*/}}
{{- define "oncekey.validate" -}}
{{- if and .Values.tls.enabled (not .Values.tls.existingSecret) }}
{{- fail "tls.enabled needs tls.existingSecret: a kubernetes.io/tls Secret with tls.crt and tls.key" }}
{{- end }}
{{- if and (not (include "oncekey.embedded" .)) (not .Values.cql.existingSecret) .Values.cql.username (not .Values.cql.password) }}
{{- fail "cql.username is set without cql.password (or use cql.existingSecret)" }}
{{- end }}
{{- /* What `oncekey serve` would refuse at start (exit 64), refused here instead. */}}
{{- $lease := include "oncekey.durationMs" .Values.server.defaultLease | int64 }}
{{- if or (lt $lease 1000) (gt $lease 3600000) }}
{{- fail (printf "server.defaultLease %s: must be between 1s and 1h" .Values.server.defaultLease) }}
{{- end }}
{{- $maxRetention := include "oncekey.durationMs" .Values.server.maxRetention | int64 }}
{{- if lt $maxRetention 60000 }}
{{- fail (printf "server.maxRetention %s: must be at least 1m" .Values.server.maxRetention) }}
{{- end }}
{{- $retention := include "oncekey.durationMs" .Values.server.defaultRetention | int64 }}
{{- if or (lt $retention 60000) (gt $retention $maxRetention) }}
{{- fail (printf "server.defaultRetention %s: must be between 1m and server.maxRetention (%s)" .Values.server.defaultRetention .Values.server.maxRetention) }}
{{- end }}
{{- $reload := include "oncekey.durationMs" .Values.server.reloadCheckInterval | int64 }}
{{- if and (ne $reload 0) (or (lt $reload 100) (gt $reload 3600000)) }}
{{- fail (printf "server.reloadCheckInterval %s: must be 0s (off) or between 100ms and 1h" .Values.server.reloadCheckInterval) }}
{{- end }}
{{- if include "oncekey.embedded" . }}
{{- $limit := ((.Values.resources).limits | default dict).memory }}
{{- if not $limit }}
{{- fail "the embedded store needs resources.limits.memory: its page cache (server.embeddedCacheMiB) is sized against it, and the memory request is set to it" }}
{{- end }}
{{- $limitMiB := include "oncekey.memoryMiB" $limit | int64 }}
{{- if gt (add (int64 .Values.server.embeddedCacheMiB) 256) $limitMiB }}
{{- fail (printf "server.embeddedCacheMiB (%d) must leave 256 MiB of resources.limits.memory (%s = %d MiB) to the rest of the server, or the pod is OOM-killed as the ledger grows" (int64 .Values.server.embeddedCacheMiB) (toString $limit) $limitMiB) }}
{{- end }}
{{- else }}
{{- $replicas := ternary .Values.autoscaling.minReplicas .Values.replicaCount .Values.autoscaling.enabled | int64 }}
{{- if .Values.autoscaling.enabled }}
{{- if lt (int64 .Values.autoscaling.maxReplicas) (int64 .Values.autoscaling.minReplicas) }}
{{- fail (printf "autoscaling.maxReplicas (%d) is below autoscaling.minReplicas (%d)" (int64 .Values.autoscaling.maxReplicas) (int64 .Values.autoscaling.minReplicas)) }}
{{- end }}
{{- end }}
{{- $pdb := .Values.podDisruptionBudget }}
{{- if $pdb.enabled }}
{{- if and (not $pdb.maxUnavailable) (regexMatch "^[0-9]+$" (toString $pdb.minAvailable)) (ge (int64 $pdb.minAvailable) $replicas) }}
{{- fail (printf "podDisruptionBudget.minAvailable (%d) must be below the replica count (%d, %s): otherwise no pod may ever be evicted and node drains hang" (int64 $pdb.minAvailable) $replicas (ternary "autoscaling.minReplicas" "replicaCount" .Values.autoscaling.enabled)) }}
{{- end }}
{{- if regexMatch "^0+%?$" (toString $pdb.maxUnavailable) }}
{{- fail "podDisruptionBudget.maxUnavailable must be at least 1 (0 blocks every node drain); leave it empty to use minAvailable" }}
{{- end }}
{{- end }}
{{- if eq .Values.cql.serialConsistency "local-serial" }}
{{- if not .Values.cql.localDc }}
{{- fail "cql.serialConsistency=local-serial needs cql.localDc: LOCAL_SERIAL means the Paxos of whichever datacenter a request lands in" }}
{{- end }}
{{- if not .Values.cql.keysDcPinned }}
{{- fail "cql.serialConsistency=local-serial lets two datacenters each acquire the same key: use it only when every key is written from one datacenter, and say so with cql.keysDcPinned=true (otherwise keep serial)" }}
{{- end }}
{{- end }}
{{- with .Values.cql.tls.serverName }}
{{- if regexMatch "^[0-9.]+$" . }}
{{- fail (printf "cql.tls.serverName %s: give the DNS name the nodes' certificates carry (IP addresses are checked without it)" .) }}
{{- end }}
{{- end }}
{{- if and .Values.cql.tls.caConfigMap .Values.cql.tls.caSecret }}
{{- fail "cql.tls: give the CA bundle in caConfigMap or in caSecret, not both" }}
{{- end }}
{{- if and (not .Values.cql.tls.enabled) (or .Values.cql.tls.caConfigMap .Values.cql.tls.caSecret .Values.cql.tls.clientCertSecret .Values.cql.tls.serverName) }}
{{- fail "cql.tls settings are given but cql.tls.enabled is false: set it, or the connection to the cluster stays plaintext" }}
{{- end }}
{{- end }}
{{- if and .Values.tests.enabled .Values.tls.enabled .Values.tls.clientAuth (not .Values.tests.clientCertSecret) }}
{{- fail "tls.clientAuth needs tests.clientCertSecret (a client certificate for the helm test pod), or tests.enabled=false" }}
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

{{/*
The body of a `helm test` container (after its name and args): the image, where the server is,
TLS and the credentials.
*/}}
{{- define "oncekey.testContainer" }}
      image: {{ include "oncekey.image" . | quote }}
      imagePullPolicy: {{ .Values.image.pullPolicy }}
      env:
        - name: ONCEKEY_SERVER
          value: {{ printf "%s://%s.%s.svc:%v" (ternary "https" "http" .Values.tls.enabled) (include "oncekey.fullname" .) .Release.Namespace .Values.service.grpcPort | quote }}
        {{- if .Values.tls.enabled }}
        - name: ONCEKEY_CLIENT_TLS_CA
          value: /etc/oncekey/test-tls-ca/ca.crt
        - name: ONCEKEY_CLIENT_TLS_DOMAIN
          value: {{ .Values.tests.serverName | default (printf "%s.%s.svc" (include "oncekey.fullname" .) .Release.Namespace) | quote }}
        {{- if .Values.tls.clientAuth }}
        - name: ONCEKEY_CLIENT_TLS_CERT
          value: /etc/oncekey/test-tls-client/tls.crt
        - name: ONCEKEY_CLIENT_TLS_KEY
          value: /etc/oncekey/test-tls-client/tls.key
        {{- end }}
        {{- end }}
        {{- if .Values.auth.allowUnauthenticated }}
        - name: ONCEKEY_TENANT
          value: helm-test
        {{- else if .Values.tests.tokenSecret }}
        - name: ONCEKEY_TOKEN
          valueFrom:
            secretKeyRef:
              name: {{ .Values.tests.tokenSecret }}
              key: {{ .Values.tests.tokenSecretKey }}
        {{- else if and .Values.tests.generateToken (include "oncekey.usesTokens" .) (not .Values.auth.existingSecret) }}
        - name: ONCEKEY_TOKEN
          valueFrom:
            secretKeyRef:
              name: {{ include "oncekey.secretName" . }}
              key: helm-test-token
        {{- end }}
      resources:
        requests:
          cpu: 10m
          memory: 16Mi
        limits:
          memory: 64Mi
      securityContext:
        {{- toYaml .Values.securityContext | nindent 8 }}
      {{- if .Values.tls.enabled }}
      volumeMounts:
        - name: test-tls-ca
          mountPath: /etc/oncekey/test-tls-ca
          readOnly: true
        {{- if .Values.tls.clientAuth }}
        - name: test-tls-client
          mountPath: /etc/oncekey/test-tls-client
          readOnly: true
        {{- end }}
      {{- end }}
{{- end }}
