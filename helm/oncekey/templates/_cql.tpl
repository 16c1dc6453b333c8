{{- /* TLS to the CQL cluster: environment, volumes and mounts shared by the server pods and the migration Job. */ -}}
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
