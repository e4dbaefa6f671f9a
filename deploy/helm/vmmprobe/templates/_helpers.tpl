{{/* The image, which must be set: no image is published yet. */}}
{{- define "vmmprobe.image" -}}
{{- $repo := required "set image.repository to the image built from deploy/Dockerfile (none is published yet)" .Values.image.repository -}}
{{- printf "%s:%s" $repo (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "vmmprobe.labels" -}}
app.kubernetes.io/name: vmmprobe
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* A workload's pod labels; .component tells the DaemonSet's pods from the Job's, which
carry no label set the DaemonSet selects (kubectl rollout status and logs -l count them). */}}
{{- define "vmmprobe.selector" -}}
app.kubernetes.io/name: vmmprobe
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* The host directory of the output, cleaned: an absolute path other than /. */}}
{{- define "vmmprobe.hostDir" -}}
{{- $dir := clean .Values.output.hostDir -}}
{{- if or (not (isAbs $dir)) (eq $dir "/") -}}
{{- fail (printf "output.hostDir %q: must be an absolute directory other than /" .Values.output.hostDir) -}}
{{- end -}}
{{- $dir -}}
{{- end -}}

{{- define "vmmprobe.outputPath" -}}
{{- printf "%s/%s" (include "vmmprobe.hostDir" .) .Values.output.file -}}
{{- end -}}

{{/* The pod spec both workloads share; .args is vmmprobe's command line. */}}
{{- define "vmmprobe.podSpec" -}}
{{- $v := .root.Values -}}
automountServiceAccountToken: false
{{- with $v.runtimeClassName }}
runtimeClassName: {{ . }}
{{- end }}
{{- with $v.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with $v.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $v.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $v.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $v.imex.resourceClaimTemplateName }}
resourceClaims:
  - name: imex-channel
    resourceClaimTemplateName: {{ . }}
{{- end }}
containers:
  - name: vmmprobe
    image: {{ include "vmmprobe.image" .root }}
    imagePullPolicy: {{ $v.image.pullPolicy }}
    args:
      {{- toYaml .args | nindent 6 }}
    env:
      - name: NVIDIA_VISIBLE_DEVICES
        value: all
      - name: NVIDIA_DRIVER_CAPABILITIES
        value: compute,utility
      {{- with $v.imex.channels }}
      - name: NVIDIA_IMEX_CHANNELS
        value: {{ . | quote }}
      {{- end }}
    {{- $res := deepCopy (default dict $v.resources) }}
    {{- if $v.imex.resourceClaimTemplateName }}
    {{- $_ := set $res "claims" (list (dict "name" "imex-channel")) }}
    {{- end }}
    {{- with $res }}
    resources:
      {{- toYaml . | nindent 6 }}
    {{- end }}
    {{- with $v.securityContext }}
    securityContext:
      {{- toYaml . | nindent 6 }}
    {{- end }}
    volumeMounts:
      - name: output
        mountPath: {{ include "vmmprobe.hostDir" $.root }}
volumes:
  - name: output
    hostPath:
      path: {{ include "vmmprobe.hostDir" $.root }}
      type: DirectoryOrCreate
{{- end -}}

{{- define "vmmprobe.nodeSelector" -}}
{{- $sel := dict -}}
{{- if eq .Values.nodeSelection "nfd" -}}
{{- $_ := set $sel "feature.node.kubernetes.io/pci-10de.present" "true" -}}
{{- else if eq .Values.nodeSelection "gfd" -}}
{{- $_ := set $sel "nvidia.com/gpu.present" "true" -}}
{{- else if ne .Values.nodeSelection "none" -}}
{{- fail (printf "nodeSelection %q: want nfd, gfd or none" .Values.nodeSelection) -}}
{{- end -}}
{{- $sel = merge $sel .Values.nodeSelector -}}
{{- with $sel }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}
