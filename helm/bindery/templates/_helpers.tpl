{{/*
Names, labels and the RBAC rules, shared by the templates. Every helper is namespaced
"bindery." so a parent chart's helpers cannot collide with these.
*/}}

{{/* The chart name (nameOverride wins). */}}
{{- define "bindery.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
The prefix of every object name: <release>-bindery, or just <release> when the release name
already contains the chart name; fullnameOverride wins. 63 characters at most (DNS label).
*/}}
{{- define "bindery.fullname" -}}
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

{{/* chart-version, for the helm.sh/chart label. */}}
{{- define "bindery.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels that select the controller pods; never change them (selectors are immutable). */}}
{{- define "bindery.selectorLabels" -}}
app.kubernetes.io/name: {{ include "bindery.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* Labels on every object the chart creates. */}}
{{- define "bindery.labels" -}}
helm.sh/chart: {{ include "bindery.chart" . }}
{{ include "bindery.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: bindery
{{- end -}}

{{/* The controller's ServiceAccount name. */}}
{{- define "bindery.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "bindery.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* repository:tag, the tag defaulting to the chart's appVersion. */}}
{{- define "bindery.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* The leader-election Lease's name (in the release namespace). */}}
{{- define "bindery.leaseName" -}}
{{- default (include "bindery.fullname" .) .Values.ha.leaseName -}}
{{- end -}}

{{/* "true" when the controller watches every namespace (no watchNamespaces). */}}
{{- define "bindery.clusterwide" -}}
{{- if not .Values.watchNamespaces -}}true{{- end -}}
{{- end -}}

{{/* Checks the schema cannot express with a clear message; included by the Deployment. */}}
{{- define "bindery.validate" -}}
{{- if and (gt (int .Values.replicas) 1) (not .Values.ha.enabled) -}}
{{- fail (printf "replicas=%d needs ha.enabled=true: several replicas elect a leader on a Lease (one reconciles, the others stand by); without it each would be a standalone controller" (int .Values.replicas)) -}}
{{- end -}}
{{- if and .Values.metrics.enabled (eq (int .Values.metrics.port) (int .Values.health.port)) -}}
{{- fail (printf "metrics.port and health.port are both %d: the metrics server and kopf's liveness endpoint need different ports" (int .Values.health.port)) -}}
{{- end -}}
{{- if and (eq .Values.workScope "cluster") .Values.watchNamespaces (not (has .Release.Namespace .Values.watchNamespaces)) -}}
{{- fail (printf "workScope=cluster keeps work holds in the release namespace %s, which watchNamespaces does not list: add it to watchNamespaces" .Release.Namespace) -}}
{{- end -}}
{{- end -}}

{{/*
RBAC rules for the namespaced kinds: what the controller does in every namespace it watches.
Rendered into the ClusterRole when watching all namespaces, into a Role per watched namespace
otherwise. Each verb is one the controller (controller/reconciler.py, controller/k8s/api.py) or
kopf actually calls; nothing is a wildcard.
*/}}
{{- define "bindery.namespacedRules" -}}
# Watched kinds: listed at start-up and watched (kopf); agents are read back when a work hold's
# holder is not in the controller's view.
- apiGroups: ["bindery.dev"]
  resources: ["resources", "tools", "resourcegrants"]
  verbs: ["get", "list", "watch"]
# Agents also get the work-hold finalizer, added and removed with a merge patch.
- apiGroups: ["bindery.dev"]
  resources: ["agentspecs"]
  verbs: ["get", "list", "watch", "patch"]
# Status is written with a JSON patch to the status subresource; spec is never written.
- apiGroups: ["bindery.dev"]
  resources: ["resources/status", "tools/status", "agentspecs/status", "resourcegrants/status"]
  verbs: ["patch"]
# The owned objects carry ownerReferences to their agent with blockOwnerDeletion, which the
# OwnerReferencesPermissionEnforcement admission plugin (where enabled) allows only to whom may
# update the owner's finalizers. It grants no API call of its own.
- apiGroups: ["bindery.dev"]
  resources: ["agentspecs/finalizers"]
  verbs: ["update"]
# The bindings ConfigMap of each agent: created, then merge-patched.
- apiGroups: [""]
  resources: ["configmaps"]
  verbs: ["get", "list", "watch", "create", "patch"]
# Agent sessions (a StatefulSet of one): created, JSON-patched on relaunch, deleted when the
# runtime is removed.
- apiGroups: ["apps"]
  resources: ["statefulsets"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
# Session workspaces (spec.runtime.workspace): a PersistentVolumeClaim <agent>-workspace,
# created before the session, merge-patched for its owner (reclaim policy) and to grow it.
# Never deleted by the controller: the garbage collector deletes it with its agent.
- apiGroups: [""]
  resources: ["persistentvolumeclaims"]
  verbs: ["get", "list", "watch", "create", "patch"]
# Work holds: a Lease created if absent (with the hold finalizer), released by patching the
# finalizer off and deleting, both guarded by the version decided from.
- apiGroups: ["coordination.k8s.io"]
  resources: ["leases"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
# Per agent with a runtime, its session's identity and least privilege for the session's
# delivery sidecar: a ServiceAccount <agent>-session, and a Role and RoleBinding
# bindery-session-<agent> (its own bindings ConfigMap and acknowledgement Lease, by name),
# created, patched back when drifted, deleted with the runtime. The Role grants only what the
# controller holds itself (configmaps get/list/watch, leases get/patch, above), so the API
# server's escalation check passes without `escalate` or `bind`, and the controller can never
# grant more than it has.
- apiGroups: [""]
  resources: ["serviceaccounts"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
- apiGroups: ["rbac.authorization.k8s.io"]
  resources: ["roles", "rolebindings"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
# Session pods (read only): their health goes into the agent's status.
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["get", "list", "watch"]
# The controller's events (events.k8s.io/v1) and kopf's (core v1; posted only on errors); core
# Events are also read (list) for a session StatefulSet's FailedCreate, the only place a pod
# that Pod Security refused is reported.
- apiGroups: ["events.k8s.io"]
  resources: ["events"]
  verbs: ["create"]
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create", "list"]
{{- end -}}

{{/* RBAC rules for cluster-scoped kinds: always in the ClusterRole. */}}
{{- define "bindery.clusterRules" -}}
# ResourceTypes are cluster-scoped: watched, and their status written.
- apiGroups: ["bindery.dev"]
  resources: ["resourcetypes"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["bindery.dev"]
  resources: ["resourcetypes/status"]
  verbs: ["patch"]
# kopf scans and watches the CRDs to find the kinds it serves.
- apiGroups: ["apiextensions.k8s.io"]
  resources: ["customresourcedefinitions"]
  verbs: ["list", "watch"]
# Read only when a workspace grows: whether its StorageClass allows volume expansion.
- apiGroups: ["storage.k8s.io"]
  resources: ["storageclasses"]
  verbs: ["get"]
# Namespaces are listed and watched for their labels, which a ResourceGrant's namespaceSelector
# reads (and, restricted to watchNamespaces, kopf follows the watched ones being created or
# deleted).
- apiGroups: [""]
  resources: ["namespaces"]
  verbs: ["list", "watch"]
{{- end -}}

{{/*
Leader election (ha.enabled): the Lease is created once, then read and renewed with
resourceVersion-guarded JSON patches. get and patch are limited to that one Lease; create cannot
be limited by name (the name is not known to RBAC before the object exists).
*/}}
{{- define "bindery.leaderElectionRules" -}}
- apiGroups: ["coordination.k8s.io"]
  resources: ["leases"]
  verbs: ["create"]
- apiGroups: ["coordination.k8s.io"]
  resources: ["leases"]
  resourceNames: [{{ include "bindery.leaseName" . | quote }}]
  verbs: ["get", "patch"]
{{- end -}}

{{/*
The ClusterRole agent sessions are bound to (per namespace) to resolve deferred parameter slots:
<fullname>-session-resolver, 63 characters at most.
*/}}
{{- define "bindery.sessionResolverRole" -}}
{{- printf "%s-session-resolver" (include "bindery.fullname" . | trunc 46 | trimSuffix "-") -}}
{{- end -}}

{{/* The ClusterRole (and its ClusterRoleBinding) letting every ServiceAccount read ResourceTypes. */}}
{{- define "bindery.sessionResolverTypesRole" -}}
{{- printf "%s-session-resolver-types" (include "bindery.fullname" . | trunc 40 | trimSuffix "-") -}}
{{- end -}}
