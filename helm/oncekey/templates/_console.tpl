{{- /* The operator console (console.enabled): names, its port and origin, and its session key. */ -}}
{{/*
Name of the console's Deployment, Service and Ingress.
*/}}
{{- define "oncekey.consoleName" -}}
{{- printf "%s-console" (include "oncekey.fullname" . | trunc 55 | trimSuffix "-") }}
{{- end }}

{{/*
Secret holding the session key: console.sessionKey.existingSecret, else the chart's own.
*/}}
{{- define "oncekey.consoleSessionSecretName" -}}
{{- default (printf "%s-session" (include "oncekey.consoleName" .)) .Values.console.sessionKey.existingSecret }}
{{- end }}

{{/*
The session key the chart puts in its Secret: the one already in the cluster when it is 64 hex
digits (so an upgrade signs nobody out), else a new random one. `helm template` cannot look, so
it renders a new key every time.
*/}}
{{- define "oncekey.consoleSessionKey" -}}
{{- $existing := lookup "v1" "Secret" .Release.Namespace (include "oncekey.consoleSessionSecretName" .) }}
{{- $kept := (($existing).data | default dict) | dig "session-key" "" | b64dec | trim }}
{{- if regexMatch "^[0-9a-f]{64}$" $kept }}
{{- $kept }}
{{- else }}
{{- /* randAlphaNum draws from crypto/rand; 64 of 62 symbols is ~381 bits, hashed to 256. */}}
{{- sha256sum (randAlphaNum 64) }}
{{- end }}
{{- end }}

{{/*
Name of the console's port (container and Service): https when it serves TLS itself.
*/}}
{{- define "oncekey.consolePortName" -}}
{{- ternary "https" "http" (not (empty .Values.console.tls.existingSecret)) }}
{{- end }}

{{/*
The --public-origin: console.publicOrigin, else https://<first ingress.tls host> when the
Ingress has TLS, else "".
*/}}
{{- define "oncekey.consolePublicOrigin" -}}
{{- $ingress := .Values.console.ingress }}
{{- if .Values.console.publicOrigin }}
{{- .Values.console.publicOrigin }}
{{- else if and $ingress.enabled $ingress.tls }}
{{- with (first $ingress.tls).hosts }}
{{- printf "https://%s" (first .) }}
{{- end }}
{{- end }}
{{- end }}
