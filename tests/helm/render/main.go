// helm-render: `helm template` for the tests, where no helm binary can be
// installed. It renders one chart directory (no subcharts, no hooks, no
// lookup, no .Capabilities) with Debian's sprig and ghodss/yaml, written
// to Helm's documented behaviour; the chart keeps within what it supports
// (helm/gangsched/README.md, "Testing the chart").
//
//	helm-render [--name N] [--namespace NS] [--revision R] [--upgrade]
//	            [-f values.yaml]... [--notes] CHART_DIR
//
// Prints the manifests, or with --notes the rendered NOTES.txt. Errors go
// to stderr as "Error: ..." with exit status 1, as helm's do.
package main

import (
	"flag"
	"fmt"
	"os"
	"path"
)

type valueFiles []string

func (v *valueFiles) String() string     { return fmt.Sprint(*v) }
func (v *valueFiles) Set(s string) error { *v = append(*v, s); return nil }

func main() {
	var files valueFiles
	release := Release{}
	flag.StringVar(&release.Name, "name", "release-name", "release name")
	flag.StringVar(&release.Namespace, "namespace", "default", "release namespace")
	flag.IntVar(&release.Revision, "revision", 1, "release revision")
	flag.BoolVar(&release.IsUpgrade, "upgrade", false, "render as an upgrade (.Release.IsUpgrade)")
	flag.Var(&files, "f", "values file (repeatable; a later one wins)")
	notes := flag.Bool("notes", false, "print the rendered NOTES.txt instead of the manifests")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: helm-render [flags] CHART_DIR")
		os.Exit(2)
	}
	out, err := run(flag.Arg(0), files, release, *notes)
	if err != nil {
		fmt.Fprintf(os.Stderr, "Error: %v\n", err)
		os.Exit(1)
	}
	fmt.Print(out)
}

func run(dir string, files []string, release Release, notes bool) (string, error) {
	chart, err := LoadChart(dir)
	if err != nil {
		return "", err
	}
	user := map[string]interface{}{}
	for _, f := range files {
		values, err := ReadValuesFile(f)
		if err != nil {
			return "", err
		}
		user = MergeValues(user, values)
	}
	engine := &Engine{chart: chart, release: release}
	rendered, err := engine.Render(CoalesceValues(user, chart.Values))
	if err != nil {
		return "", err
	}
	if notes {
		return rendered[path.Join(chart.Metadata.Name, "templates", notesFile)], nil
	}
	manifests, err := Manifests(rendered)
	if err != nil {
		return "", err
	}
	return Format(manifests), nil
}
