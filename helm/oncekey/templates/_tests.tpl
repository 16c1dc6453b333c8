{{- /* `helm test`: the generated token and the body of the test pod's containers. */ -}}
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
