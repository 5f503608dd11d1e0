// Helm's behaviours the chart relies on, each pinned to what Helm does
// (pkg/engine's tests and the documentation's examples).
package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// chartWith writes a chart of the given files (paths relative to the
// chart) into a temporary directory.
func chartWith(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	all := map[string]string{
		"Chart.yaml": "apiVersion: v2\nname: demo\nversion: 0.1.0\nappVersion: \"1.2\"\n",
	}
	for name, text := range files {
		all[name] = text
	}
	for name, text := range all {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func renderOne(t *testing.T, files map[string]string, valueFiles ...string) (string, error) {
	t.Helper()
	return run(chartWith(t, files), valueFiles,
		Release{Name: "rel", Namespace: "ns", Revision: 1}, false)
}

func mustRender(t *testing.T, files map[string]string) string {
	t.Helper()
	out, err := renderOne(t, files)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestToYamlTrimsTheFinalNewlineAndSortsKeys(t *testing.T) {
	out := mustRender(t, map[string]string{
		"values.yaml":       "m: {b: 2, a: [x, z]}\n",
		"templates/cm.yaml": "v: |\n{{ toYaml .Values.m | indent 2 }}\nend: 1\n",
	})
	want := "v: |\n  a:\n  - x\n  - z\n  b: 2\nend: 1"
	if !strings.Contains(out, want) {
		t.Fatalf("got\n%s\nwant it to contain\n%s", out, want)
	}
}

func TestIncludeWithNindentAndTrimming(t *testing.T) {
	out := mustRender(t, map[string]string{
		"templates/_helpers.tpl": `{{- define "demo.labels" -}}
app: {{ .Chart.Name }}
release: {{ .Release.Name }}
{{- end }}`,
		"templates/cm.yaml": `kind: ConfigMap
metadata:
  labels:
    {{- include "demo.labels" . | nindent 4 }}
  version: {{ .Chart.AppVersion | quote }}
`,
	})
	want := "metadata:\n  labels:\n    app: demo\n    release: rel\n  version: \"1.2\""
	if !strings.Contains(out, want) {
		t.Fatalf("got\n%s\nwant it to contain\n%s", out, want)
	}
	if !strings.HasPrefix(out, "---\n# Source: demo/templates/cm.yaml\n") {
		t.Fatalf("no Source header:\n%s", out)
	}
}

func TestRequiredFailsOnNilAndEmptyButNotOnFalse(t *testing.T) {
	tpl := map[string]string{
		"values.yaml":      "a: \"\"\nb: false\n",
		"templates/x.yaml": "b: {{ required \"b needed\" .Values.b }}\na: {{ required \"set a, see README\" .Values.a }}\n",
	}
	_, err := renderOne(t, tpl)
	if err == nil || !strings.Contains(err.Error(), "execution error at (demo/templates/x.yaml:2:") ||
		!strings.HasSuffix(err.Error(), ": set a, see README") {
		t.Fatalf("want Helm's required error, got %v", err)
	}
	delete(tpl, "values.yaml")
	if _, err := renderOne(t, tpl); err == nil || !strings.Contains(err.Error(), "b needed") {
		t.Fatalf("nil must fail too, got %v", err)
	}
}

func TestTplSeesItsScopeAndTheNamedTemplates(t *testing.T) {
	out := mustRender(t, map[string]string{
		"values.yaml":            "host: \"{{ .Release.Name }}-etcd.{{ .Release.Namespace }}:{{ include \\\"demo.port\\\" . }}\"\nsub: {name: inner}\n",
		"templates/_helpers.tpl": `{{ define "demo.port" }}2379{{ end }}`,
		"templates/x.yaml":       "host: {{ tpl .Values.host $ }}\nsub: {{ tpl \"{{ .name }}-{{ .missing }}\" .Values.sub }}\n",
	})
	if !strings.Contains(out, "host: rel-etcd.ns:2379") || !strings.Contains(out, "sub: inner-\n") {
		t.Fatalf("got\n%s", out)
	}
	_, err := renderOne(t, map[string]string{
		"templates/x.yaml": "a: {{ tpl \"{{ .nope.deeper }}\" . }}\n",
	})
	if err == nil || !strings.Contains(err.Error(), "error during tpl function execution") {
		t.Fatalf("a failing tpl names itself, got %v", err)
	}
}

func TestFailStopsWithHelmsMessage(t *testing.T) {
	_, err := renderOne(t, map[string]string{
		"templates/x.yaml": "{{ if true }}{{ fail \"shim.mode: no\" }}{{ end }}\n",
	})
	if err == nil || err.Error() != "execution error at (demo/templates/x.yaml:1:16): shim.mode: no" {
		t.Fatalf("got %v", err)
	}
}

func TestMissingValuesRenderEmpty(t *testing.T) {
	out := mustRender(t, map[string]string{
		"templates/x.yaml": "a: \"{{ .Values.nothing }}\"\n",
	})
	if !strings.Contains(out, "a: \"\"") {
		t.Fatalf("got\n%s", out)
	}
}

func TestValuesFilesMergeAndNullDeletesADefault(t *testing.T) {
	dir := t.TempDir()
	first := filepath.Join(dir, "1.yaml")
	second := filepath.Join(dir, "2.yaml")
	os.WriteFile(first, []byte("m: {a: 1, b: 1}\nlist: [1, 2]\n"), 0o644)
	os.WriteFile(second, []byte("m: {b: 2, c: null}\nlist: [3]\n"), 0o644)
	out, err := renderOne(t, map[string]string{
		"values.yaml":      "m: {c: 3, d: 4}\nlist: [0]\n",
		"templates/x.yaml": "v: {{ toJson .Values }}\n",
	}, first, second)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, `v: {"list":[3],"m":{"a":1,"b":2,"d":4}}`) {
		t.Fatalf("got\n%s", out)
	}
}

func TestFilesGetAndEnvIsNotAFunction(t *testing.T) {
	out := mustRender(t, map[string]string{
		"dashboards/d.json": "{\"a\": 1}",
		"templates/x.yaml":  "d: {{ .Files.Get \"dashboards/d.json\" | quote }}\nmissing: \"{{ .Files.Get \"nope\" }}\"\n",
	})
	if !strings.Contains(out, `d: "{\"a\": 1}"`) || !strings.Contains(out, `missing: ""`) {
		t.Fatalf("got\n%s", out)
	}
	_, err := renderOne(t, map[string]string{
		"templates/x.yaml": "home: {{ env \"HOME\" }}\n",
	})
	if err == nil || !strings.Contains(err.Error(), `function "env" not defined`) {
		t.Fatalf("env must not exist in Helm, got %v", err)
	}
}

func TestManifestsSplitSortByKindAndSkipPartialsAndNotes(t *testing.T) {
	out := mustRender(t, map[string]string{
		"templates/a.yaml":     "kind: Deployment\nmetadata: {name: d}\n---\n\n---\nkind: Service\nmetadata: {name: s}\n",
		"templates/b.yaml":     "kind: ServiceAccount\nmetadata: {name: sa}\n",
		"templates/c.yaml":     "kind: Widget\nmetadata: {name: w}\n",
		"templates/_x.tpl":     "kind: Secret\n",
		"templates/NOTES.txt":  "hello {{ .Release.Name }}\n",
		"templates/empty.yaml": "{{- if false }}\nkind: Pod\n{{- end }}\n",
	})
	var kinds []string
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "kind: ") {
			kinds = append(kinds, strings.TrimPrefix(line, "kind: "))
		}
	}
	if strings.Join(kinds, ",") != "ServiceAccount,Service,Deployment,Widget" {
		t.Fatalf("order %v\n%s", kinds, out)
	}
	notes, err := run(chartWith(t, map[string]string{"templates/NOTES.txt": "hi {{ .Release.Name }}"}),
		nil, Release{Name: "rel"}, true)
	if err != nil || notes != "hi rel" {
		t.Fatalf("notes %q %v", notes, err)
	}
}
