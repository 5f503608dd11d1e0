// The rendered files as `helm template` prints them: split into YAML
// documents, empty ones dropped, sorted by kind in Helm's install order
// (pkg/releaseutil: kind_sorter.go), each under a "# Source:" line.
package main

import (
	"fmt"
	"path"
	"regexp"
	"sort"
	"strings"

	"github.com/ghodss/yaml"
)

// Helm's document separator (releaseutil.SplitManifests).
var separator = regexp.MustCompile("(?:^|\\s*\n)---\\s*")

var installOrder = []string{
	"Namespace", "NetworkPolicy", "ResourceQuota", "LimitRange",
	"PodSecurityPolicy", "PodDisruptionBudget", "ServiceAccount", "Secret",
	"SecretList", "ConfigMap", "StorageClass", "PersistentVolume",
	"PersistentVolumeClaim", "CustomResourceDefinition", "ClusterRole",
	"ClusterRoleList", "ClusterRoleBinding", "ClusterRoleBindingList", "Role",
	"RoleList", "RoleBinding", "RoleBindingList", "Service", "DaemonSet",
	"Pod", "ReplicationController", "ReplicaSet", "Deployment",
	"HorizontalPodAutoscaler", "StatefulSet", "Job", "CronJob",
	"IngressClass", "Ingress", "APIService",
}

type Manifest struct {
	Source  string
	Kind    string
	Content string
}

// head is what Helm reads of each document before sorting it.
type head struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind,omitempty"`
}

const notesFile = "NOTES.txt"

// Manifests splits the rendered templates (NOTES.txt left out) into
// documents, in Helm's install order; a document that is not YAML is an
// error naming its template.
func Manifests(rendered map[string]string) ([]Manifest, error) {
	names := make([]string, 0, len(rendered))
	for name := range rendered {
		if path.Base(name) != notesFile {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	var out []Manifest
	for _, name := range names {
		for _, doc := range separator.Split(rendered[name], -1) {
			if strings.TrimSpace(doc) == "" {
				continue
			}
			var h head
			if err := yaml.Unmarshal([]byte(doc), &h); err != nil {
				return nil, fmt.Errorf("YAML parse error on %s: %w", name, err)
			}
			out = append(out, Manifest{Source: name, Kind: h.Kind, Content: doc})
		}
	}
	rank := map[string]int{}
	for i, kind := range installOrder {
		rank[kind] = i
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		ra, aKnown := rank[a.Kind]
		rb, bKnown := rank[b.Kind]
		switch {
		case aKnown && bKnown && ra != rb:
			return ra < rb
		case aKnown != bKnown:
			return aKnown // unknown kinds go last
		case !aKnown && a.Kind != b.Kind:
			return a.Kind < b.Kind
		}
		return a.Source < b.Source
	})
	return out, nil
}

// Format prints manifests as `helm template` does.
func Format(manifests []Manifest) string {
	var b strings.Builder
	for _, m := range manifests {
		fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", m.Source, m.Content)
	}
	return b.String()
}
