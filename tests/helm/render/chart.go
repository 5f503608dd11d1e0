// The chart as Helm loads it: Chart.yaml, the default values coalesced with
// the user's values files, the templates, and every other file for .Files.
package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/ghodss/yaml"
)

// Metadata is Chart.yaml, with the field names Helm's chart.Metadata gives
// templates (.Chart.Name, .Chart.Version, .Chart.AppVersion...).
type Metadata struct {
	Name        string            `json:"name"`
	Home        string            `json:"home,omitempty"`
	Sources     []string          `json:"sources,omitempty"`
	Version     string            `json:"version"`
	Description string            `json:"description,omitempty"`
	Keywords    []string          `json:"keywords,omitempty"`
	Icon        string            `json:"icon,omitempty"`
	APIVersion  string            `json:"apiVersion"`
	AppVersion  string            `json:"appVersion,omitempty"`
	KubeVersion string            `json:"kubeVersion,omitempty"`
	Type        string            `json:"type,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// Files is what .Files reads: every chart file outside templates/ and
// charts/ other than Chart.yaml and values.yaml, by path relative to the
// chart. Get answers "" for a file that is not there, as Helm does.
type Files map[string][]byte

func (f Files) Get(name string) string      { return string(f[name]) }
func (f Files) GetBytes(name string) []byte { return f[name] }

// Template is one file of templates/, named as Helm names it
// ("<chart>/templates/<file>").
type Template struct {
	Name string
	Text string
}

type Chart struct {
	Metadata  Metadata
	Values    map[string]interface{} // values.yaml
	Templates []Template
	Files     Files
}

func LoadChart(dir string) (*Chart, error) {
	c := &Chart{Files: Files{}}
	raw, err := os.ReadFile(filepath.Join(dir, "Chart.yaml"))
	if err != nil {
		return nil, err
	}
	if err := yaml.UnmarshalStrict(raw, &c.Metadata); err != nil {
		return nil, fmt.Errorf("Chart.yaml: %w", err)
	}
	if c.Metadata.APIVersion != "v2" || c.Metadata.Name == "" ||
		c.Metadata.Version == "" {
		return nil, fmt.Errorf("Chart.yaml: apiVersion v2, name and version are required")
	}
	c.Values, err = ReadValuesFile(filepath.Join(dir, "values.yaml"))
	if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	if c.Values == nil {
		c.Values = map[string]interface{}{}
	}
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel == "charts" {
				return fmt.Errorf("%s: subcharts are not supported", path)
			}
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		switch {
		case strings.HasPrefix(rel, "templates/"):
			c.Templates = append(c.Templates, Template{
				Name: c.Metadata.Name + "/" + rel, Text: string(data)})
		case rel == "Chart.yaml" || rel == "values.yaml" ||
			rel == "values.schema.json" || rel == ".helmignore":
		default:
			c.Files[rel] = data
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(c.Templates, func(i, j int) bool {
		return c.Templates[i].Name < c.Templates[j].Name
	})
	return c, nil
}

// ReadValuesFile parses YAML the way Helm's chartutil.ReadValues does
// (through JSON: numbers become float64).
func ReadValuesFile(path string) (map[string]interface{}, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	values := map[string]interface{}{}
	if err := yaml.Unmarshal(raw, &values); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return values, nil
}

// MergeValues merges several -f files as Helm does: a later file wins, maps
// are merged key by key, anything else (lists included) is replaced.
func MergeValues(base, next map[string]interface{}) map[string]interface{} {
	out := make(map[string]interface{}, len(base))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range next {
		if nextMap, ok := v.(map[string]interface{}); ok {
			if baseMap, ok := out[k].(map[string]interface{}); ok {
				out[k] = MergeValues(baseMap, nextMap)
				continue
			}
		}
		out[k] = v
	}
	return out
}

// CoalesceValues lays the user's values over the chart's defaults as
// Helm's chartutil.CoalesceTables does: the user's value wins, maps are
// merged, and a user's null deletes the default.
func CoalesceValues(user, defaults map[string]interface{}) map[string]interface{} {
	out := make(map[string]interface{}, len(user))
	for k, v := range user {
		out[k] = v
	}
	for k, dv := range defaults {
		uv, present := out[k]
		switch {
		case present && uv == nil:
			delete(out, k)
		case !present:
			out[k] = dv
		default:
			um, uIsMap := uv.(map[string]interface{})
			dm, dIsMap := dv.(map[string]interface{})
			if uIsMap && dIsMap {
				out[k] = CoalesceValues(um, dm)
			}
		}
	}
	return out
}
