// Command persescheck reads PersesDashboard resources (JSON, one per file) and checks each
// against Perses' own model: spec.config must unmarshal into github.com/perses/perses'
// v1.Dashboard, whose decoding validates the dashboard (panel ids, unique variable names, every
// layout item pointing at an existing panel, the layout and variable kinds it knows), and must
// come back unchanged when marshalled again, so that no field is one Perses does not know
// (which its decoder would drop without a word). Exit status 1 names every failure.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"reflect"

	v1 "github.com/perses/perses/pkg/model/api/v1"
)

type resource struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
	Spec struct {
		Config json.RawMessage `json:"config"`
	} `json:"spec"`
}

func check(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var r resource
	if err := json.Unmarshal(data, &r); err != nil {
		return fmt.Errorf("not a resource: %w", err)
	}
	if r.APIVersion != "perses.dev/v1alpha2" || r.Kind != "PersesDashboard" {
		return fmt.Errorf("%s/%s is not perses.dev/v1alpha2 PersesDashboard", r.APIVersion, r.Kind)
	}
	project := r.Metadata.Namespace
	if project == "" {
		project = "default"
	}
	wrapped, err := json.Marshal(map[string]any{
		"kind":     "Dashboard",
		"metadata": map[string]string{"name": r.Metadata.Name, "project": project},
		"spec":     r.Spec.Config,
	})
	if err != nil {
		return err
	}
	var dashboard v1.Dashboard
	if err := json.Unmarshal(wrapped, &dashboard); err != nil {
		return fmt.Errorf("perses rejects the dashboard: %w", err)
	}
	again, err := json.Marshal(dashboard.Spec)
	if err != nil {
		return err
	}
	var before, after any
	if err := json.Unmarshal(r.Spec.Config, &before); err != nil {
		return err
	}
	if err := json.Unmarshal(again, &after); err != nil {
		return err
	}
	if !reflect.DeepEqual(before, after) {
		return fmt.Errorf("perses' model does not keep the dashboard as written:\n%s", diff(before, after, "spec.config"))
	}
	return nil
}

// diff names the first paths where two decoded JSON values differ.
func diff(a, b any, path string) string {
	var out bytes.Buffer
	var walk func(a, b any, path string)
	walk = func(a, b any, path string) {
		if out.Len() > 2000 {
			return
		}
		am, aok := a.(map[string]any)
		bm, bok := b.(map[string]any)
		if aok && bok {
			for k, v := range am {
				if w, ok := bm[k]; ok {
					walk(v, w, path+"."+k)
				} else {
					fmt.Fprintf(&out, "  %s.%s: dropped\n", path, k)
				}
			}
			for k := range bm {
				if _, ok := am[k]; !ok {
					fmt.Fprintf(&out, "  %s.%s: added\n", path, k)
				}
			}
			return
		}
		al, aok := a.([]any)
		bl, bok := b.([]any)
		if aok && bok && len(al) == len(bl) {
			for i := range al {
				walk(al[i], bl[i], fmt.Sprintf("%s[%d]", path, i))
			}
			return
		}
		if !reflect.DeepEqual(a, b) {
			fmt.Fprintf(&out, "  %s: %v became %v\n", path, a, b)
		}
	}
	walk(a, b, path)
	return out.String()
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: persescheck FILE.json...")
		os.Exit(2)
	}
	failed := false
	for _, path := range os.Args[1:] {
		if err := check(path); err != nil {
			fmt.Printf("%s: %v\n", path, err)
			failed = true
		} else {
			fmt.Printf("%s: ok\n", path)
		}
	}
	if failed {
		os.Exit(1)
	}
}
