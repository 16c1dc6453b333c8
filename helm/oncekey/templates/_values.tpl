{{- /* Reading values: durations and memory quantities as the server and Kubernetes parse them. */ -}}
{{/*
A duration value (500ms, 30s, 5m, 24h, 30d, or bare seconds) in milliseconds, as the server
parses it.
*/}}
{{- define "oncekey.durationMs" -}}
{{- $text := toString . }}
{{- $digits := regexFind "^[0-9]+" $text }}
{{- $scale := get (dict "ms" 1 "" 1000 "s" 1000 "m" 60000 "h" 3600000 "d" 86400000) (trimPrefix $digits $text) }}
{{- mul (int64 $digits) $scale }}
{{- end }}

{{/*
A memory quantity (512Mi, 1Gi, 1G, 1073741824) in whole MiB; fails on other forms.
*/}}
{{- define "oncekey.memoryMiB" -}}
{{- $text := toString . }}
{{- $number := regexFind "^[0-9]+(\\.[0-9]+)?" $text }}
{{- $units := dict "" 1.0 "Ki" 1024.0 "Mi" 1048576.0 "Gi" 1073741824.0 "Ti" 1099511627776.0 "k" 1000.0 "M" 1000000.0 "G" 1000000000.0 "T" 1000000000000.0 }}
{{- $unit := trimPrefix $number $text }}
{{- if or (not $number) (not (hasKey $units $unit)) }}
{{- fail (printf "resources.limits.memory %q: give a quantity like 512Mi or 1Gi" $text) }}
{{- end }}
{{- divf (mulf (float64 $number) (get $units $unit)) 1048576.0 | floor | int64 }}
{{- end }}
