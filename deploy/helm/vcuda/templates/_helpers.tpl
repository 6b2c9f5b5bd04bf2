{{/* Labels every object carries; `name` is the component (vcuda-control-plane, …). */}}
{{- define "vcuda.labels" -}}
app.kubernetes.io/name: {{ .name }}
app.kubernetes.io/part-of: vcuda
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version }}
{{- end -}}

{{/* Refuses values the templates cannot honour; the schema catches the rest. */}}
{{- define "vcuda.validate" -}}
{{- $kube := .Capabilities.KubeVersion.Version -}}
{{- if and (eq .Values.mode "dra") (semverCompare "<1.34.0-0" $kube) -}}
{{- fail (printf "mode: \"dra\" needs resource.k8s.io/v1 with consumable capacity (Kubernetes 1.36, or 1.34/1.35 with the DRAConsumableCapacity feature gate), and this cluster is %s; use mode: extender" $kube) -}}
{{- end -}}
{{- if and .Values.dra.convertPods (ne .Values.mode "dra") -}}
{{- fail (printf "dra.convertPods: true needs mode: \"dra\" (pods become claims only where the node agents are DRA drivers), and mode is %q" .Values.mode) -}}
{{- end -}}
{{- if and .Values.dra.modeLabel (not .Values.dra.convertPods) -}}
{{- fail (printf "dra.modeLabel: %q chooses which pods are converted, so it needs dra.convertPods: true" .Values.dra.modeLabel) -}}
{{- end -}}
{{- if not (or .Values.database.url .Values.database.existingSecret) -}}
{{- fail "database: the quota ledger needs PostgreSQL; set database.url (postgres://…) or database.existingSecret (a Secret holding the url)" -}}
{{- end -}}
{{- end -}}

{{- define "vcuda.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/*
kube-scheduler's image: the API server's own version unless a tag is given. Provider suffixes
(v1.32.13-eks-1234, v1.32.13+k3s1) are dropped: registry.k8s.io publishes plain versions only.
*/}}
{{- define "vcuda.schedulerImage" -}}
{{- $tag := .Values.scheduler.image.tag -}}
{{- if not $tag -}}
{{- $tag = regexFind "^v?[0-9]+\\.[0-9]+\\.[0-9]+" .Capabilities.KubeVersion.Version -}}
{{- if not (hasPrefix "v" $tag) }}{{ $tag = printf "v%s" $tag }}{{ end -}}
{{- end -}}
{{ .Values.scheduler.image.repository }}:{{ $tag }}
{{- end -}}

{{/* The Secret and key holding the database url: the chart's own when database.url is set. */}}
{{- define "vcuda.databaseSecret" -}}
{{ if .Values.database.url }}vcuda-postgres{{ else }}{{ .Values.database.existingSecret }}{{ end }}
{{- end -}}

{{- define "vcuda.databaseSecretKey" -}}
{{ if .Values.database.url }}url{{ else }}{{ .Values.database.existingSecretKey }}{{ end }}
{{- end -}}

{{/* The node agent's and the control plane's service accounts, and any users the values add. */}}
{{- define "vcuda.privilegedUsers" -}}
{{- $own := list (printf "system:serviceaccount:%s:vcuda-control-plane" .Release.Namespace) (printf "system:serviceaccount:%s:vcuda-node-agent" .Release.Namespace) -}}
{{ concat $own .Values.privilegedUsers | uniq | toJson }}
{{- end -}}
