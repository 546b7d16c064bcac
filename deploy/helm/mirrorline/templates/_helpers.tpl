{{/* Names and labels, as `helm create` makes them. */}}
{{- define "mirrorline.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "mirrorline.fullname" -}}
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

{{- define "mirrorline.selectorLabels" -}}
app.kubernetes.io/name: {{ include "mirrorline.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "mirrorline.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "mirrorline.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: {{ .Values.mode }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "mirrorline.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* Whether jobs run their executors as Kubernetes pods. */}}
{{- define "mirrorline.sparkOnK8s" -}}
{{- if hasPrefix "k8s://" .Values.spark.master }}true{{ end }}
{{- end }}

{{- define "mirrorline.sparkServiceAccount" -}}
{{- default (printf "%s-spark" (include "mirrorline.fullname" .)) .Values.spark.kubernetes.serviceAccount.name }}
{{- end }}

{{/* The worker's spark.* settings (defaults of every job), one per line, indented by `.indent`. */}}
{{- define "mirrorline.sparkProperties" -}}
{{- $v := .root.Values }}
{{- $settings := dict }}
{{- if $v.spark.master }}
{{- $_ := set $settings "spark.master" $v.spark.master }}
{{- end }}
{{- if include "mirrorline.sparkOnK8s" .root }}
{{- $_ := set $settings "spark.submit.deployMode" "client" }}
{{- $_ := set $settings "spark.kubernetes.container.image" $v.spark.kubernetes.image }}
{{- $_ := set $settings "spark.kubernetes.namespace" (default .root.Release.Namespace $v.spark.kubernetes.namespace) }}
{{- $_ := set $settings "spark.kubernetes.authenticate.driver.serviceAccountName" (include "mirrorline.sparkServiceAccount" .root) }}
{{- $_ := set $settings "spark.driver.bindAddress" "0.0.0.0" }}
{{- end }}
{{- range $key, $value := $v.spark.conf }}
{{- $_ := set $settings (ternary $key (printf "spark.%s" $key) (hasPrefix "spark." $key)) $value }}
{{- end }}
{{- include "mirrorline.properties" (dict "prefix" "" "settings" $settings "indent" .indent) }}
{{- end }}

{{/* The file the command reads, in /etc/mirrorline. */}}
{{- define "mirrorline.configFile" -}}
{{- if eq .Values.mode "mm2" }}mm2.properties{{ else }}worker.properties{{ end }}
{{- end }}

{{/*
`key = value` lines of a settings map (sorted by key), each on a new line indented by
`.indent`; nothing for an empty map. Whole numbers print as integers: Helm reads every number
in values as a float, which would otherwise print 1000000 as 1e+06.
*/}}
{{- define "mirrorline.properties" -}}
{{- $prefix := .prefix }}
{{- $pad := repeat (int .indent) " " }}
{{- range $key, $value := .settings }}
{{- if and (kindIs "float64" $value) (eq (float64 (int64 $value)) $value) }}
{{- $value = int64 $value }}
{{- end }}
{{- printf "\n%s%s%s = %v" $pad $prefix $key $value }}
{{- end }}
{{- end }}

{{/*
Settings that contradict each other stop the rendering here, with a message saying what to
change (values.schema.json has already checked each value's type on its own).
*/}}
{{- define "mirrorline.validate" -}}
{{- $v := .Values }}
{{- if and (gt (int $v.replicas) 1) (eq $v.mode "standalone") }}
{{- fail (printf "replicas: %d needs mode: distributed or mode: mm2. A standalone worker cannot scale: every replica would run all its connectors on its own, copying each record once per replica with separate offsets. Set replicas: 1, or mode: distributed (workers share connectors through a Kafka group) or mode: mm2 (each flow is a distributed worker)." (int $v.replicas)) }}
{{- end }}
{{- if eq $v.mode "mm2" }}
{{- if lt (len $v.mm2.clusters) 2 }}
{{- fail "mode: mm2 needs mm2.clusters to list at least two clusters (alias and bootstrapServers each)." }}
{{- end }}
{{- if not $v.mm2.flows }}
{{- fail "mode: mm2 needs at least one flow in mm2.flows (source, target, topics)." }}
{{- end }}
{{- $aliases := list }}
{{- range $v.mm2.clusters }}{{ $aliases = append $aliases .alias }}{{ end }}
{{- range $v.mm2.flows }}
{{- if or (not (has .source $aliases)) (not (has .target $aliases)) }}
{{- fail (printf "mm2.flows: flow %s->%s names a cluster not in mm2.clusters (%s)." .source .target (join ", " $aliases)) }}
{{- end }}
{{- if eq .source .target }}
{{- fail (printf "mm2.flows: flow %s->%s has the same source and target." .source .target) }}
{{- end }}
{{- end }}
{{- range $v.mm2.targetClusters }}
{{- if not (has . $aliases) }}
{{- fail (printf "mm2.targetClusters: %s is not in mm2.clusters (%s)." . (join ", " $aliases)) }}
{{- end }}
{{- end }}
{{- else if not $v.worker.bootstrapServers }}
{{- fail (printf "mode: %s needs worker.bootstrapServers (the Kafka cluster the workers write to)." $v.mode) }}
{{- end }}
{{- if and (include "mirrorline.sparkOnK8s" .) (not $v.spark.kubernetes.image) }}
{{- fail (printf "spark.master: %s runs executors as pods and needs spark.kubernetes.image (Spark plus the same mirrorline and Python as the worker)." $v.spark.master) }}
{{- end }}
{{- end }}
