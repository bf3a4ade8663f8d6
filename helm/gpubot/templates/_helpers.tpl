{{/* The chart's name, and the release's full name (the Service is "gpubot" when the release is). */}}
{{- define "gpubot.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "gpubot.fullname" -}}
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

{{- define "gpubot.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "gpubot.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "gpubot.selectorLabels" -}}
app.kubernetes.io/name: {{ include "gpubot.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "gpubot.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "gpubot.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "gpubot.secretName" -}}
{{- default (include "gpubot.fullname" .) .Values.existingSecret }}
{{- end }}

{{- define "gpubot.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* True when the store is (or may be) shared: a PostgreSQL URL, or a Secret we cannot read. */}}
{{- define "gpubot.externalStore" -}}
{{- if or .Values.existingSecret (regexMatch "^postgres(ql)?(\\+psycopg)?://" .Values.store.url) }}true{{ end }}
{{- end }}

{{/* The data volume is a PersistentVolumeClaim only for one replica on SQLite's file. */}}
{{- define "gpubot.usePVC" -}}
{{- if and .Values.persistence.enabled (eq (int .Values.replicas) 1) }}true{{ end }}
{{- end }}

{{- define "gpubot.claimName" -}}
{{- default (printf "%s-data" (include "gpubot.fullname" .)) .Values.persistence.existingClaim }}
{{- end }}

{{- define "gpubot.rulesConfigMap" -}}
{{- if .Values.rules.existingConfigMap }}
{{- .Values.rules.existingConfigMap }}
{{- else if .Values.rules.custom }}
{{- printf "%s-rules" (include "gpubot.fullname" .) }}
{{- end }}
{{- end }}

{{/*
The settings file: .Values.config with what the chart owns set over it. The Lease is in the
release namespace (where the Role allows it); the port is the container's.
*/}}
{{- define "gpubot.settings" -}}
{{- $settings := deepCopy (.Values.config | default dict) }}
{{- $serve := deepCopy (get $settings "serve" | default dict) }}
{{- $_ := set $serve "port" (int .Values.port) }}
{{- /* gpubot serve listens on 127.0.0.1 unless told otherwise; in a pod it must answer on the
pod's address (Service, probes). */}}
{{- if not (hasKey $serve "host") }}
{{- $_ := set $serve "host" "0.0.0.0" }}
{{- end }}
{{- $_ := set $serve "lease_namespace" .Release.Namespace }}
{{- $_ := set $serve "lease_name" (printf "%s-leader" (include "gpubot.fullname" .)) }}
{{- $_ := set $settings "serve" $serve }}
{{- /* The smoke-test pods go where the Role allows them: the release namespace. */}}
{{- $remediation := deepCopy (get $settings "remediation" | default dict) }}
{{- $smoke := deepCopy (get $remediation "smoke_test" | default dict) }}
{{- $_ := set $smoke "enabled" .Values.smokeTest.enabled }}
{{- if .Values.smokeTest.enabled }}
{{- $_ := set $smoke "namespace" .Release.Namespace }}
{{- if .Values.smokeTest.image }}
{{- $_ := set $smoke "image" .Values.smokeTest.image }}
{{- end }}
{{- end }}
{{- $_ := set $remediation "smoke_test" $smoke }}
{{- $_ := set $settings "remediation" $remediation }}
{{- $slack := deepCopy (get $settings "slack" | default dict) }}
{{- $_ := set $slack "mode" .Values.slack.mode }}
{{- if .Values.slack.channel }}
{{- $_ := set $slack "channel" .Values.slack.channel }}
{{- end }}
{{- $_ := set $settings "slack" $slack }}
{{- if not (hasKey $settings "store_url") }}
{{- $_ := set $settings "store_url" "sqlite:////var/lib/gpubot/gpubot.db" }}
{{- end }}
{{- toYaml $settings }}
{{- end }}

{{/* The secrets as environment variables: from the chart's Secret or existingSecret. */}}
{{- define "gpubot.secretEnv" -}}
{{- $secret := include "gpubot.secretName" . }}
- name: GPUBOT_SERVE__BEARER_TOKEN
  valueFrom:
    secretKeyRef: {name: {{ $secret }}, key: bearer-token}
{{- range $env, $key := dict "GPUBOT_SLACK__BOT_TOKEN" "slack-bot-token" "GPUBOT_SLACK__SIGNING_SECRET" "slack-signing-secret" "GPUBOT_SLACK__APP_TOKEN" "slack-app-token" "GPUBOT_STORE_URL" "store-url" }}
- name: {{ $env }}
  valueFrom:
    secretKeyRef: {name: {{ $secret }}, key: {{ $key }}, optional: true}
{{- end }}
{{- end }}
