{{/* Names, labels and the secret wiring shared by the templates. */}}

{{- define "leapcount.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The release's base name; Services and the StatefulSet are named from it. */}}
{{- define "leapcount.fullname" -}}
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

{{/* The headless Service: one DNS A record per pod, the --join seed. */}}
{{- define "leapcount.headless" -}}
{{- printf "%s-headless" (include "leapcount.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The --join seed: the headless Service's fully qualified name and the gossip port. The
     trailing dot makes the name absolute, so the lookup does not first try it under each
     of the pod's search domains (resolv.conf has ndots:5 in Kubernetes). */}}
{{- define "leapcount.join" -}}
{{- printf "%s.%s.svc.%s.:%d" (include "leapcount.headless" .) .Release.Namespace .Values.clusterDomain (int .Values.ports.gossip) }}
{{- end }}

{{- define "leapcount.selectorLabels" -}}
app.kubernetes.io/name: {{ include "leapcount.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "leapcount.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "leapcount.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* The Secret holding the gossip key: the user's, or the generated one ("" if none). */}}
{{- define "leapcount.gossipSecret" -}}
{{- with .Values.security.gossipKey }}
{{- if .existingSecret }}{{ .existingSecret }}{{ else if .generate }}{{ include "leapcount.fullname" $ }}-gossip{{ end }}
{{- end }}
{{- end }}

{{/* The Secret holding the client token: the user's, or the generated one ("" if none). */}}
{{- define "leapcount.tokenSecret" -}}
{{- with .Values.security.token }}
{{- if .existingSecret }}{{ .existingSecret }}{{ else if .generate }}{{ include "leapcount.fullname" $ }}-token{{ end }}
{{- end }}
{{- end }}

{{/* terminationGracePeriodSeconds: the preStop sleep, then the node's whole drain, then a margin. */}}
{{- define "leapcount.gracePeriod" -}}
{{- add (int .Values.preStop.sleepSeconds) (int .Values.shutdownTimeoutSeconds) (int .Values.terminationGraceMarginSeconds) }}
{{- end }}

{{/* A generated Secret holding one key: the value already in the cluster when there is
     one (lookup), else fresh. Arguments: root, name, key, fresh. */}}
{{- define "leapcount.generatedSecret" -}}
{{- $old := lookup "v1" "Secret" .root.Release.Namespace .name }}
{{- $value := .fresh | b64enc }}
{{- if and $old (hasKey $old.data .key) }}
{{- $value = index $old.data .key }}
{{- end }}
---
apiVersion: v1
kind: Secret
metadata:
  name: {{ .name }}
  labels:
    {{- include "leapcount.labels" .root | nindent 4 }}
  annotations:
    helm.sh/resource-policy: keep
type: Opaque
data:
  {{ .key }}: {{ $value }}
{{- end }}
