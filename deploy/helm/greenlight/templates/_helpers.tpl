{{/* The chart's name. */}}
{{- define "greenlight.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The objects' name: the release's, with the chart's name unless it already holds it. */}}
{{- define "greenlight.fullname" -}}
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

{{- define "greenlight.selectorLabels" -}}
app.kubernetes.io/name: {{ include "greenlight.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "greenlight.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "greenlight.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: watchdog
{{- end }}

{{- define "greenlight.serviceAccountName" -}}
{{- default (include "greenlight.fullname" .) .Values.serviceAccount.name }}
{{- end }}

{{/* `--store-name`: names the Watchdog object and labels the Watch objects. */}}
{{- define "greenlight.storeName" -}}
{{- default (include "greenlight.fullname" .) .Values.store.name }}
{{- end }}

{{/* `--lease-name`. */}}
{{- define "greenlight.leaseName" -}}
{{- default (include "greenlight.storeName" .) .Values.leaderElection.leaseName }}
{{- end }}

{{- define "greenlight.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag }}
{{- if .Values.image.digest }}
{{- if not (regexMatch "^sha256:[0-9a-f]{64}$" .Values.image.digest) }}
{{- fail (printf "image.digest %q: give sha256:<64 lowercase hex digits>" .Values.image.digest) }}
{{- end }}
{{- printf "%s:%s@%s" .Values.image.repository $tag .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository $tag }}
{{- end }}
{{- end }}

{{/*
The RBAC rules, in one place: every Role and ClusterRole of the chart takes its rules from
here, and README.md#rbac says why each is there.

"greenlight.rules.applications": where Argo CD's Applications live (the namespaces of
`namespaces`, or all of them).
*/}}
{{- define "greenlight.rules.applications" -}}
# Read Argo CD's Applications (list, then watch from the listing's resourceVersion; get one to
# name it in an Event). greenlight never writes an Application.
- apiGroups: ["argoproj.io"]
  resources: ["applications"]
  verbs: ["get", "list", "watch"]
# Write the Events greenlight reports on an Application, in the Application's namespace (a
# repeated Event is patched as a series).
- apiGroups: ["events.k8s.io"]
  resources: ["events"]
  verbs: ["create", "patch"]
{{- end }}

{{/* "greenlight.rules.store": the release's namespace only. */}}
{{- define "greenlight.rules.store" -}}
# The leader election's Lease: read the holder, take it over, renew and release it (update).
# Only the chart's Lease by name; create cannot be restricted to a name (the object does not
# exist yet), so it is its own rule.
- apiGroups: ["coordination.k8s.io"]
  resources: ["leases"]
  resourceNames: [{{ include "greenlight.leaseName" . | quote }}]
  verbs: ["get", "update"]
- apiGroups: ["coordination.k8s.io"]
  resources: ["leases"]
  verbs: ["create"]
# The cluster store (docs/state.md#rbac): one Watch object a watch, listed at start, written
# by the leader, finished ones pruned past --retain; the Watchdog object (tip, breaker,
# memory), patched by `greenlight breaker reset`. Nothing watches them; no Watchdog is deleted.
- apiGroups: ["greenlight.dev"]
  resources: ["watches"]
  verbs: ["get", "list", "create", "update", "delete"]
- apiGroups: ["greenlight.dev"]
  resources: ["watchdogs"]
  verbs: ["get", "create", "update", "patch"]
{{- end }}
