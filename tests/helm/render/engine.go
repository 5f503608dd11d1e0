// The template engine, to Helm's documented behaviour (helm.sh/docs,
// "Template Function List" and "Built-in Objects"; Helm 3's pkg/engine):
// one text/template set holding every file of templates/, sprig's functions
// without env and expandenv, and Helm's include, tpl, required, fail,
// toYaml, fromYaml, toJson, fromJson; getHostByName answers "" (no
// --enable-dns); missing keys render as empty ("<no value>" is removed, as
// Helm does when not --strict).
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"regexp"
	"strings"
	"text/template"

	// Sprig 3 (Debian's golang-github-masterminds-sprig-dev), under the
	// import path GOPATH mode finds it at; Helm imports it as .../sprig/v3.
	"github.com/Masterminds/sprig"
	"github.com/ghodss/yaml"
)

// Release is .Release as Helm fills it for `helm template` / install.
type Release struct {
	Name      string
	Namespace string
	Revision  int
	IsUpgrade bool
}

func (r Release) toMap() map[string]interface{} {
	return map[string]interface{}{
		"Name":      r.Name,
		"Namespace": r.Namespace,
		"Revision":  r.Revision,
		"IsUpgrade": r.IsUpgrade,
		"IsInstall": !r.IsUpgrade,
		"Service":   "Helm",
	}
}

// Helm nests includes at most this deep (pkg/engine: recursionMaxNums).
const maxIncludeDepth = 1000

// required's message travels inside the template error between these, so
// the failure reads as Helm's: "execution error at (file:line:col): msg".
const (
	warnStart = "HELM_ERR_START"
	warnEnd   = "HELM_ERR_END"
)

var warnRegex = regexp.MustCompile(warnStart + `((?s).*)` + warnEnd)

type Engine struct {
	chart   *Chart
	release Release
}

// Render executes every template not named _* and answers the output per
// template name. NOTES.txt is rendered like any other file; the caller
// decides whether it is a manifest.
func (e *Engine) Render(values map[string]interface{}) (map[string]string, error) {
	t := template.New("gotpl").Option("missingkey=zero")
	includeDepth := map[string]int{}
	funcs := sprig.TxtFuncMap()
	delete(funcs, "env")
	delete(funcs, "expandenv")
	funcs["toYaml"] = toYAML
	funcs["fromYaml"] = fromYAML
	funcs["toJson"] = toJSON
	funcs["fromJson"] = fromJSON
	funcs["include"] = includeFunc(t, includeDepth)
	funcs["tpl"] = tplFunc(t, includeDepth)
	funcs["required"] = required
	funcs["fail"] = fail
	// Helm answers DNS lookups only with --enable-dns.
	funcs["getHostByName"] = func(string) string { return "" }
	t.Funcs(funcs)
	for _, tpl := range e.chart.Templates {
		if _, err := t.New(tpl.Name).Parse(tpl.Text); err != nil {
			return nil, parseError(tpl.Name, err)
		}
	}
	out := map[string]string{}
	for _, tpl := range e.chart.Templates {
		if strings.HasPrefix(path.Base(tpl.Name), "_") {
			continue
		}
		var buf strings.Builder
		if err := t.ExecuteTemplate(&buf, tpl.Name, e.topScope(values, tpl.Name)); err != nil {
			return nil, execError(tpl.Name, err)
		}
		out[tpl.Name] = strings.ReplaceAll(buf.String(), "<no value>", "")
	}
	return out, nil
}

func (e *Engine) topScope(values map[string]interface{}, name string) map[string]interface{} {
	return map[string]interface{}{
		"Values":  values,
		"Release": e.release.toMap(),
		"Chart":   &e.chart.Metadata,
		"Files":   e.chart.Files,
		"Template": map[string]interface{}{
			"Name":     name,
			"BasePath": e.chart.Metadata.Name + "/templates",
		},
	}
}

// includeFunc executes a named template of `t` into a string, at most
// maxIncludeDepth deep per name.
func includeFunc(t *template.Template, depth map[string]int) func(string, interface{}) (string, error) {
	return func(name string, data interface{}) (string, error) {
		if depth[name] > maxIncludeDepth {
			return "", fmt.Errorf("unable to execute template: rendering template has a nested reference name: %s", name)
		}
		depth[name]++
		defer func() { depth[name]-- }()
		var buf strings.Builder
		err := t.ExecuteTemplate(&buf, name, data)
		return buf.String(), err
	}
}

// tplFunc renders a string as a template with any data as its scope, as
// Helm 3.13 and later do: in a clone of the template set (so it sees, and
// may define, named templates), with include and tpl bound to the clone.
func tplFunc(parent *template.Template, depth map[string]int) func(string, interface{}) (string, error) {
	return func(text string, data interface{}) (string, error) {
		t, err := parent.Clone()
		if err != nil {
			return "", fmt.Errorf("cannot clone template: %w", err)
		}
		t.Option("missingkey=zero")
		t.Funcs(template.FuncMap{
			"include": includeFunc(t, depth),
			"tpl":     tplFunc(t, depth),
		})
		t, err = t.New(parent.Name()).Parse(text)
		if err != nil {
			return "", fmt.Errorf("cannot parse template %q: %w", text, err)
		}
		var buf strings.Builder
		if err := t.Execute(&buf, data); err != nil {
			return "", fmt.Errorf("error during tpl function execution for %q: %w", text, err)
		}
		return strings.ReplaceAll(buf.String(), "<no value>", ""), nil
	}
}

// fail stops rendering with the message, reported as Helm reports it.
func fail(message string) (string, error) {
	return "", errors.New(warnStart + message + warnEnd)
}

// required fails on nil and on the empty string, nothing else (a false or a
// 0 passes), as Helm's does.
func required(message string, value interface{}) (interface{}, error) {
	if value == nil {
		return nil, errors.New(warnStart + message + warnEnd)
	}
	if s, ok := value.(string); ok && s == "" {
		return nil, errors.New(warnStart + message + warnEnd)
	}
	return value, nil
}

// toYAML marshals through JSON (sigs.k8s.io/yaml's way: keys sorted) and
// trims the final newline; an error renders as "".
func toYAML(v interface{}) string {
	data, err := yaml.Marshal(v)
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(string(data), "\n")
}

// fromYAML parses a YAML mapping; an error goes into the map's "Error" key.
func fromYAML(text string) map[string]interface{} {
	m := map[string]interface{}{}
	if err := yaml.Unmarshal([]byte(text), &m); err != nil {
		m["Error"] = err.Error()
	}
	return m
}

func toJSON(v interface{}) string {
	data, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(data)
}

func fromJSON(text string) map[string]interface{} {
	m := map[string]interface{}{}
	if err := json.Unmarshal([]byte(text), &m); err != nil {
		m["Error"] = err.Error()
	}
	return m
}

// parseError and execError shorten Go's messages the way Helm's
// cleanupParseError / cleanupExecError do.
func parseError(name string, err error) error {
	tokens := strings.Split(err.Error(), ": ")
	if len(tokens) == 1 {
		return fmt.Errorf("parse error in (%s): %s", name, err)
	}
	return fmt.Errorf("parse error at (%s): %s", tokens[1], tokens[len(tokens)-1])
}

func execError(name string, err error) error {
	var execErr template.ExecError
	if !errors.As(err, &execErr) {
		return err
	}
	tokens := strings.SplitN(err.Error(), ": ", 3)
	if len(tokens) != 3 {
		return fmt.Errorf("execution error in (%s): %s", name, err)
	}
	if parts := warnRegex.FindStringSubmatch(tokens[2]); len(parts) >= 2 {
		return fmt.Errorf("execution error at (%s): %s", tokens[1], parts[1])
	}
	return err
}
