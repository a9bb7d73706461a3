// Command crosscheck checks interop/layout's reading of data.go against kube's own
// code: it runs k8s.io/kubernetes test/integration/etcd's GetEtcdStorageDataForNamespace
// (built, not parsed) and compares every served GVR's ExpectedEtcdPath and storage
// GVK with the rows interop/layout wrote (its -summary JSON). The kind of a GVR without
// an ExpectedGVK comes from kube-apiserver's own scheme (legacyscheme, every group
// installed by pkg/controlplane; the aggregator's apiservices are not in it and are
// checked by path and version only). It prints every difference and exits 1 if any.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	"k8s.io/kubernetes/test/integration/etcd"
)

type row struct {
	Group      string   `json:"group"`
	Resource   string   `json:"resource"`
	KeyPrefix  string   `json:"keyPrefix"`
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Namespaced bool     `json:"namespaced"`
	Served     []string `json:"served"`
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: crosscheck SUMMARY.json (interop/layout's -summary)")
		os.Exit(2)
	}
	b, err := os.ReadFile(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var summary struct{ Rows []row }
	if err := json.Unmarshal(b, &summary); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	rows := map[schema.GroupResource]row{}
	for _, r := range summary.Rows {
		rows[schema.GroupResource{Group: r.Group, Resource: r.Resource}] = r
	}

	const mark = "\x00"
	data := etcd.GetEtcdStorageDataForNamespace(mark)
	kinds := map[schema.GroupVersion][]string{}
	for gvk := range legacyscheme.Scheme.AllKnownTypes() {
		kinds[gvk.GroupVersion()] = append(kinds[gvk.GroupVersion()], gvk.Kind)
	}
	var problems, notes []string
	served := map[schema.GroupResource][]string{}
	for gvr, d := range data {
		gr := gvr.GroupResource()
		want, ok := rows[gr]
		if !ok {
			notes = append(notes, fmt.Sprintf("not in the table: %v (a custom resource of data.go's CRDs?)", gvr))
			continue
		}
		served[gr] = append(served[gr], gvr.Version)
		segments := strings.Split(strings.TrimPrefix(d.ExpectedEtcdPath, "/registry/"), "/")
		namespaced := len(segments) > 2 && segments[len(segments)-2] == mark
		prefix := segments[:len(segments)-1]
		if namespaced {
			prefix = segments[:len(segments)-2]
		}
		gvk := d.ExpectedGVK
		if gvk == nil {
			kind := "?"
			for _, k := range kinds[gvr.GroupVersion()] {
				if l := strings.ToLower(k); l == gvr.Resource || l+"s" == gvr.Resource || l+"es" == gvr.Resource ||
					strings.TrimSuffix(l, "y")+"ies" == gvr.Resource {
					kind = k
				}
			}
			if kind == "?" {
				notes = append(notes, fmt.Sprintf("%v: kind not in legacyscheme, checked by path and version only", gvr))
				kind = want.Kind
			}
			gvk = &schema.GroupVersionKind{Group: gvr.Group, Version: gvr.Version, Kind: kind}
		}
		got := row{Group: gr.Group, Resource: gr.Resource, KeyPrefix: strings.Join(prefix, "/"),
			APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind, Namespaced: namespaced}
		want.Served = nil
		if fmt.Sprint(got) != fmt.Sprint(want) {
			problems = append(problems, fmt.Sprintf("%v: kube says %+v, the table %+v", gvr, got, want))
		}
	}
	for gr, r := range rows {
		sort.Strings(served[gr])
		sort.Strings(r.Served)
		if strings.Join(served[gr], ",") != strings.Join(r.Served, ",") {
			problems = append(problems, fmt.Sprintf("%v: kube serves %v, the table says %v", gr, served[gr], r.Served))
		}
	}
	sort.Strings(notes)
	sort.Strings(problems)
	for _, n := range notes {
		fmt.Println("note:", n)
	}
	for _, p := range problems {
		fmt.Println("DIFFERENCE:", p)
	}
	fmt.Printf("%d served GVRs from kube, %d rows in the table, %d differences\n", len(data), len(rows), len(problems))
	if len(problems) > 0 {
		os.Exit(1)
	}
}
