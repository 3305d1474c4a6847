{{/* The scrape settings shared by the exporter's ServiceMonitor and PodMonitor: the node's
     name (the pod's spec.nodeName, the field the downward API gives) becomes `node`, the job
     is `gpu-health-exporter` as rules/prometheus/ expect; the user's relabelings follow. */}}
{{- define "gpu-health.exporterEndpoint" -}}
{{- $m := index . 1 -}}
interval: {{ $m.interval }}
scrapeTimeout: {{ $m.scrapeTimeout }}
path: /metrics
scheme: http
relabelings:
  - sourceLabels: [__meta_kubernetes_pod_node_name]
    targetLabel: node
    action: replace
  - targetLabel: job
    replacement: gpu-health-exporter
    action: replace
  {{- with $m.relabelings }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- with $m.metricRelabelings }}
metricRelabelings:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}
