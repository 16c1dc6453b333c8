{{- /* The chart's own checks of values against each other, run by the workload templates. */ -}}
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
{{- range .Values.server.retentionCeilings }}
{{- $ceiling := include "oncekey.durationMs" (regexReplaceAll "^.*=" . "") | int64 }}
{{- if or (lt $ceiling 60000) (gt $ceiling $maxRetention) }}
{{- fail (printf "server.retentionCeilings %s: the duration must be between 1m and server.maxRetention (%s)" . $.Values.server.maxRetention) }}
{{- end }}
{{- end }}
{{- range .Values.server.keyPrivacy }}
{{- if and (not (hasSuffix "=off" .)) (not $.Values.server.encryption.existingSecret) }}
{{- fail (printf "server.keyPrivacy %s needs server.encryption.existingSecret: a key ring with a key flagged hmac" .) }}
{{- end }}
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
