{{/*
The prefix of every object's name: .Values.namePrefix, or "<release>-".
config/default's kustomize namePrefix is "webapp-"; a release named
"webapp" gets the same names.
*/}}
{{- define "webapp-operator.prefix" -}}
{{- default (printf "%s-" .Release.Name) .Values.namePrefix -}}
{{- end }}

{{/* Whether the names differ from the operator's flag defaults (config/default's). */}}
{{- define "webapp-operator.customNames" -}}
{{- if ne (include "webapp-operator.prefix" .) "webapp-" }}true{{ end -}}
{{- end }}

{{- define "webapp-operator.selfManagedCerts" -}}
{{- if eq .Values.webhook.certificates.mode "self-managed" }}true{{ end -}}
{{- end }}

{{/*
Helm's recommended labels, on every object. They are the only difference
from config/default's objects that packaging/chart_test.go accepts.
*/}}
{{- define "webapp-operator.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/*
The manager's pod labels, also the Deployment's selector and the webhook
Service's: config/manager's, so that an upgrade from a kustomize install
keeps the (immutable) selector.
*/}}
{{- define "webapp-operator.selectorLabels" -}}
control-plane: controller-manager
{{- end }}

{{- define "webapp-operator.serviceAccountName" -}}
{{ include "webapp-operator.prefix" . }}controller-manager
{{- end }}

{{/* cert-manager's CA injection, on both webhook configurations in cert-manager mode. */}}
{{- define "webapp-operator.injectCA" -}}
{{- if eq .Values.webhook.certificates.mode "cert-manager" -}}
annotations:
  cert-manager.io/inject-ca-from: {{ .Release.Namespace }}/{{ include "webapp-operator.prefix" . }}serving-cert
{{- end }}
{{- end }}
