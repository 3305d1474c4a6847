{{/* Names, labels and the evaluator's config file (docs/kubernetes.md). */}}

{{- define "gpu-health.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "gpu-health.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Component names within Kubernetes' limits for any release name Helm accepts (53
characters): a Service name is a DNS label (63); a StatefulSet's name at most 52, because its
pods carry a controller-revision-hash label of the name plus 11 characters (a label value: 63). */}}
{{- define "gpu-health.exporter" -}}
{{- printf "%s-exporter" (include "gpu-health.fullname" . | trunc 54 | trimSuffix "-") -}}
{{- end -}}
{{- define "gpu-health.evaluator" -}}
{{- printf "%s-evaluator" (include "gpu-health.fullname" . | trunc 42 | trimSuffix "-") -}}
{{- end -}}
{{- define "gpu-health.evaluatorHeadless" -}}
{{- printf "%s-headless" (include "gpu-health.evaluator" .) -}}
{{- end -}}

{{- define "gpu-health.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "gpu-health.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "gpu-health.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: gpu-health
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Selector labels of one component: `include "gpu-health.selector" (list . "exporter")`. */}}
{{- define "gpu-health.selector" -}}
{{- $ctx := index . 0 -}}
app.kubernetes.io/name: {{ include "gpu-health.name" $ctx }}
app.kubernetes.io/instance: {{ $ctx.Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{/* Paths inside the evaluator's pod (absolute: a ConfigMap mount is a tree of symlinks). */}}
{{- define "gpu-health.secretsDir" -}}/etc/gpu-health/secrets{{- end -}}
{{- define "gpu-health.configDir" -}}/etc/gpu-health/config{{- end -}}

{{- define "gpu-health.tokensSecret" -}}
{{- if .Values.evaluator.api.existingSecret -}}
{{- .Values.evaluator.api.existingSecret -}}
{{- else if or .Values.evaluator.api.tokens .Values.evaluator.api.prometheusToken.value -}}
{{- printf "%s-tokens" (include "gpu-health.evaluator" .) -}}
{{- end -}}
{{- end -}}

{{- define "gpu-health.passwordSecret" -}}
{{- if .Values.evaluator.storage.existingSecret -}}
{{- .Values.evaluator.storage.existingSecret -}}
{{- else if .Values.evaluator.storage.password -}}
{{- printf "%s-postgres" (include "gpu-health.evaluator" .) -}}
{{- end -}}
{{- end -}}

{{- define "gpu-health.prometheusTokenSecret" -}}
{{- if .Values.evaluator.api.prometheusToken.existingSecret -}}
{{- .Values.evaluator.api.prometheusToken.existingSecret -}}
{{- else if .Values.evaluator.api.prometheusToken.value -}}
{{- printf "%s-scrape-token" (include "gpu-health.evaluator" .) -}}
{{- end -}}
{{- end -}}

{{/* The evaluator's config file as a dict (merged with evaluator.config, then toYaml). */}}
{{- define "gpu-health.evaluatorConfig" -}}
{{- $e := .Values.evaluator -}}
{{- $cfg := dict "web" (dict "listen_address" (printf "0.0.0.0:%v" $e.port)) -}}
{{- if $e.externalUrl -}}{{- $_ := set $cfg.web "external_url" $e.externalUrl -}}{{- end -}}
{{- if $e.storage.url -}}
{{- $storage := dict "url" $e.storage.url -}}
{{- if include "gpu-health.passwordSecret" . -}}
{{- $_ := set $storage "password_file" (printf "%s/postgres-password" (include "gpu-health.secretsDir" .)) -}}
{{- end -}}
{{- $_ := set $cfg "storage" $storage -}}
{{- else -}}
{{- $_ := set $cfg "storage" (dict "path" "/var/lib/gpu-health/gpu-health.duckdb") -}}
{{- end -}}
{{- if eq $e.ingest.source "prometheus" -}}
{{- $p := $e.ingest.prometheus -}}
{{- $prom := dict "url" $p.url "metrics" $p.metrics "step" $p.step "lag" $p.lag -}}
{{- if $p.selector -}}{{- $_ := set $prom "selector" $p.selector -}}{{- end -}}
{{- if $p.history -}}{{- $_ := set $prom "history" $p.history -}}{{- end -}}
{{- if $p.bearerTokenSecret.name -}}
{{- $_ := set $prom "bearer_token_file" (printf "%s/prometheus-bearer-token" (include "gpu-health.secretsDir" .)) -}}
{{- end -}}
{{- $_ := set $cfg "ingest" (dict "source" "prometheus" "prometheus" $prom) -}}
{{- end -}}
{{- if and (eq $e.ingest.source "scrape") (not (include "gpu-health.hasTargets" .)) -}}
{{- $names := list (include "gpu-health.exporterDns" .) -}}
{{- $_ := set $cfg "dns_sd_configs" (list (dict "names" $names "type" "A" "port" (int .Values.exporter.port) "refresh_interval" "30s")) -}}
{{- end -}}
{{- $_ := set $cfg "alerting" (dict "alertmanagers" $e.alertmanagers) -}}
{{- $rules := dict -}}
{{- if $e.rules.active -}}{{- $_ := set $rules "active" $e.rules.active -}}{{- end -}}
{{- $_ := set $cfg "rules" $rules -}}
{{- if include "gpu-health.tokensSecret" . -}}
{{- $_ := set $cfg "api" (dict "tokens_file" (printf "%s/tokens.yml" (include "gpu-health.secretsDir" .))) -}}
{{- end -}}
{{- toYaml (mustMergeOverwrite $cfg (deepCopy $e.config)) -}}
{{- end -}}

{{/* Whether evaluator.config names targets itself ("" when it does not). */}}
{{- define "gpu-health.hasTargets" -}}
{{- $c := .Values.evaluator.config -}}
{{- if or $c.static_configs $c.file_sd_configs $c.http_sd_configs $c.dns_sd_configs -}}yes{{- end -}}
{{- end -}}

{{/* The exporters' headless Service as a DNS name the pod's search path completes. */}}
{{- define "gpu-health.exporterDns" -}}
{{- printf "%s.%s.svc" (include "gpu-health.exporter" .) .Release.Namespace -}}
{{- end -}}
