// Command golden writes the golden fixtures apistore-protobuf is tested against.
//
// For every kind registered in the scheme kube-apiserver serves (client-go's
// kubernetes/scheme, apiextensions v1/v1beta1 and apiregistration v1/v1beta1) it
// writes one file, <group>_<version>_<Kind>.json ("core" for the core group),
// holding pairs of
//
//   - the protobuf bytes kube-apiserver stores in etcd (the `k8s\0` envelope around a
//     runtime.Unknown, written by apimachinery's protobuf serializer), and
//   - the JSON encoding/json.Marshal emits for the same object, apiVersion and kind set.
//
// The objects are hand-built realistic objects for the kinds a cluster is full of, and
// for every kind -fuzz objects filled by the fuzzer Kubernetes' own round-trip tests
// use, from -seed. A fuzzed object is kept only if it is stable: protobuf -> object ->
// JSON -> object -> protobuf gives the same protobuf bytes (after at most one
// normalising pass through that loop); what is not stable is dropped and counted in
// index.json.
//
// The output is a function of -fuzz and -seed only: running it twice gives the same
// bytes.
package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"hash/fnv"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsv1beta1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1beta1"
	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	metafuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	apiregistrationv1beta1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1beta1"
)

// goldenCase is one (JSON, protobuf) pair in a fixture file.
type goldenCase struct {
	Name     string `json:"name"`
	JSON     string `json:"json"`
	Protobuf string `json:"protobuf"`
}

// indexEntry describes one fixture file in index.json.
type indexEntry struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	File       string `json:"file"`
	Realistic  int    `json:"realistic"`
	Fuzzed     int    `json:"fuzzed"`
	Dropped    int    `json:"dropped"`
}

// skippedEntry is a registered kind with no fixture file, and why.
type skippedEntry struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Reason     string `json:"reason"`
}

type index struct {
	Seed    int64          `json:"seed"`
	Fuzz    int            `json:"fuzz"`
	Kinds   []indexEntry   `json:"kinds"`
	Skipped []skippedEntry `json:"skipped"`
}

// metaPkg holds the kinds metav1.AddToGroupVersion registers in every group
// version (WatchEvent, the *Options) and the unversioned ones (Status, APIVersions,
// APIGroup...).
const metaPkg = "k8s.io/apimachinery/pkg/apis/meta/v1"

func main() {
	out := flag.String("out", "", "directory to write the fixtures to (created if missing)")
	fuzzN := flag.Int("fuzz", 2, "fuzzed objects per kind")
	seed := flag.Int64("seed", 1, "seed of the fuzzer")
	lists := flag.Bool("lists", true, "also write fixtures for the List kinds")
	flag.Parse()
	if *out == "" {
		fmt.Fprintln(os.Stderr, "golden: -out is required")
		os.Exit(2)
	}
	if err := run(*out, *fuzzN, *seed, *lists); err != nil {
		fmt.Fprintln(os.Stderr, "golden:", err)
		os.Exit(1)
	}
}

func newScheme() *runtime.Scheme {
	s := scheme.Scheme
	utilruntime.Must(apiextensionsv1.AddToScheme(s))
	utilruntime.Must(apiextensionsv1beta1.AddToScheme(s))
	utilruntime.Must(apiregistrationv1.AddToScheme(s))
	utilruntime.Must(apiregistrationv1beta1.AddToScheme(s))
	return s
}

func run(out string, fuzzN int, seed int64, lists bool) error {
	s := newScheme()
	codecs := serializer.NewCodecFactory(s)
	pb := protobuf.NewSerializer(s, s)
	golden, err := goldenFuzzerFuncs(codecs)
	if err != nil {
		return err
	}
	funcs := fuzzer.MergeFuzzerFuncs(metafuzzer.Funcs, func(serializer.CodecFactory) []interface{} { return golden })
	realistic := realisticObjects()

	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}

	var gvks []schema.GroupVersionKind
	for gvk := range s.AllKnownTypes() {
		gvks = append(gvks, gvk)
	}
	sort.Slice(gvks, func(i, j int) bool { return gvkLess(gvks[i], gvks[j]) })

	idx := index{Seed: seed, Fuzz: fuzzN, Kinds: []indexEntry{}, Skipped: []skippedEntry{}}
	used := map[schema.GroupVersionKind]bool{}
	for _, gvk := range gvks {
		apiVersion := gvk.GroupVersion().String()
		if gvk.Version == runtime.APIVersionInternal {
			continue
		}
		switch {
		case s.AllKnownTypes()[gvk].PkgPath() == metaPkg:
			// metav1's own kinds (WatchEvent, Status, the *Options), registered in
			// every group version and never stored: not listed.
			continue
		case strings.HasSuffix(gvk.Kind, "List") && !lists:
			idx.Skipped = append(idx.Skipped, skippedEntry{apiVersion, gvk.Kind, "list kind"})
			continue
		}
		probe, err := s.New(gvk)
		if err != nil {
			return err
		}
		if _, ok := probe.(interface{ Marshal() ([]byte, error) }); !ok {
			idx.Skipped = append(idx.Skipped, skippedEntry{apiVersion, gvk.Kind, "no protobuf encoding"})
			continue
		}

		var cases []goldenCase
		entry := indexEntry{APIVersion: apiVersion, Kind: gvk.Kind, File: fileName(gvk)}

		for _, r := range realistic[gvk] {
			used[gvk] = true
			c, ok, err := stableCase(s, pb, gvk, r.obj)
			if err != nil {
				return fmt.Errorf("%s %s: realistic %s: %w", apiVersion, gvk.Kind, r.name, err)
			}
			if !ok {
				return fmt.Errorf("%s %s: realistic %s is not stable through protobuf and JSON", apiVersion, gvk.Kind, r.name)
			}
			c.Name = "realistic/" + r.name
			cases = append(cases, c)
			entry.Realistic++
		}

		// One fuzzer per kind, seeded from -seed and the kind, so that adding a kind
		// or raising -fuzz leaves the other cases as they were.
		fill := fillWith(fuzzer.FuzzerFor(funcs, rand.NewSource(kindSeed(seed, gvk)), codecs))
		for attempt := 0; entry.Fuzzed < fuzzN && attempt < 4*fuzzN; attempt++ {
			obj, err := s.New(gvk)
			if err != nil {
				return err
			}
			fill(obj)
			c, ok, err := stableCase(s, pb, gvk, obj)
			if err != nil || !ok {
				entry.Dropped++
				continue
			}
			c.Name = fmt.Sprintf("fuzz/%d", attempt)
			cases = append(cases, c)
			entry.Fuzzed++
		}

		if err := writeFixture(filepath.Join(out, entry.File), apiVersion, gvk.Kind, cases); err != nil {
			return err
		}
		idx.Kinds = append(idx.Kinds, entry)
	}
	for gvk := range realistic {
		if !used[gvk] {
			return fmt.Errorf("realistic objects for %v, which is not a registered storable kind", gvk)
		}
	}

	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", " ")
	if err := enc.Encode(idx); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(out, "index.json"), buf.Bytes(), 0o644)
}

// stableCase encodes obj as kube-apiserver stores it and as encoding/json marshals
// it, and checks that the pair is a fixed point: protobuf -> object -> JSON -> object
// -> protobuf gives the protobuf again. One normalising pass is allowed (the fuzzer
// makes states neither encoding can tell apart, such as an empty and a nil slice).
func stableCase(s *runtime.Scheme, pb *protobuf.Serializer, gvk schema.GroupVersionKind, obj runtime.Object) (goldenCase, bool, error) {
	p, err := encodeProtobuf(pb, gvk, obj)
	if err != nil {
		return goldenCase{}, false, err
	}
	for pass := 0; pass < 2; pass++ {
		j, p2, err := loop(s, pb, gvk, p)
		if err != nil {
			return goldenCase{}, false, err
		}
		if bytes.Equal(p, p2) {
			// The JSON must be a fixed point too: decoding P gives J.
			j2, _, err := loop(s, pb, gvk, p2)
			if err != nil {
				return goldenCase{}, false, err
			}
			if !bytes.Equal(j, j2) {
				return goldenCase{}, false, nil
			}
			return goldenCase{JSON: string(j), Protobuf: base64.StdEncoding.EncodeToString(p)}, true, nil
		}
		p = p2
	}
	return goldenCase{}, false, nil
}

// loop decodes stored protobuf bytes, marshals the object to JSON, unmarshals that
// into a fresh object and encodes it to protobuf again.
func loop(s *runtime.Scheme, pb *protobuf.Serializer, gvk schema.GroupVersionKind, p []byte) ([]byte, []byte, error) {
	obj, _, err := pb.Decode(p, nil, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("decode protobuf: %w", err)
	}
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	j, err := json.Marshal(obj)
	if err != nil {
		return nil, nil, fmt.Errorf("marshal JSON: %w", err)
	}
	fresh, err := s.New(gvk)
	if err != nil {
		return nil, nil, err
	}
	if err := json.Unmarshal(j, fresh); err != nil {
		return nil, nil, fmt.Errorf("unmarshal JSON: %w", err)
	}
	p2, err := encodeProtobuf(pb, gvk, fresh)
	if err != nil {
		return nil, nil, err
	}
	return j, p2, nil
}

func encodeProtobuf(pb *protobuf.Serializer, gvk schema.GroupVersionKind, obj runtime.Object) (out []byte, err error) {
	// A fuzzed object can hold what the generated marshallers refuse by panicking
	// (a nil element where none may be); such a case is dropped.
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("encode protobuf: panic: %v", r)
		}
	}()
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	var buf bytes.Buffer
	if err := pb.Encode(obj, &buf); err != nil {
		return nil, fmt.Errorf("encode protobuf: %w", err)
	}
	return buf.Bytes(), nil
}

func writeFixture(path, apiVersion, kind string, cases []goldenCase) error {
	var buf bytes.Buffer
	head, err := json.Marshal(map[string]string{"apiVersion": apiVersion, "kind": kind})
	if err != nil {
		return err
	}
	buf.Write(head[:len(head)-1])
	buf.WriteString(",\"cases\":[")
	for i, c := range cases {
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.WriteString("\n")
		line, err := json.Marshal(c)
		if err != nil {
			return err
		}
		buf.Write(line)
	}
	buf.WriteString("\n]}\n")
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

func fileName(gvk schema.GroupVersionKind) string {
	group := gvk.Group
	if group == "" {
		group = "core"
	}
	return fmt.Sprintf("%s_%s_%s.json", group, gvk.Version, gvk.Kind)
}

func kindSeed(seed int64, gvk schema.GroupVersionKind) int64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d/%s/%s/%s", seed, gvk.Group, gvk.Version, gvk.Kind)
	return int64(h.Sum64() >> 1)
}

func gvkLess(a, b schema.GroupVersionKind) bool {
	if a.Group != b.Group {
		return a.Group < b.Group
	}
	if a.Version != b.Version {
		return a.Version < b.Version
	}
	return a.Kind < b.Kind
}

// typeOf is a small helper for the realistic table: the GroupVersionKind an object
// is registered under.
func typeOf(s *runtime.Scheme, obj runtime.Object) schema.GroupVersionKind {
	gvks, _, err := s.ObjectKinds(obj)
	if err != nil || len(gvks) == 0 {
		panic(fmt.Sprintf("golden: %v is not registered: %v", reflect.TypeOf(obj), err))
	}
	return gvks[0]
}
