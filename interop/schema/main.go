// Command schema writes the protobuf/JSON schema that crates/apistore-protobuf
// embeds: for every kind registered in client-go's scheme plus apiextensions.k8s.io
// and apiregistration.k8s.io, the Go struct layout of its type seen through
// reflection (JSON name, omitempty, inline, protobuf tag, type shape), in Go field
// declaration order.
//
// Usage: go run . -out ../../crates/apistore-protobuf/schema/k8s-1.31.json
//
// The output format (all lists sorted, so the file is deterministic):
//
//	{"schema": "k8s-1.31",
//	 "kinds": [[apiVersion, kind, typeName], ...],
//	 "types": {typeName: {"special": name?, "fields": [[json, flags, tag, wire, type], ...]}}}
//
// typeName is "<package path>.<Go type name>". flags holds 'o' for omitempty and 'i'
// for an embedded struct flattened into its parent's JSON object. tag is the protobuf
// field number (0 for the inline TypeMeta, which protobuf does not carry) and wire the
// first element of the protobuf struct tag. type is one of: string, bool, int32,
// int64, uint32, uint64, float32, float64, bytes, a typeName, "*"+type, "[]"+type or
// "map:"+type (string keys). special names the types whose JSON or protobuf form is
// written by hand in Go rather than derived from their fields.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextv1beta1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	aggv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	aggv1beta1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1beta1"
)

const (
	metaPkg    = "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimePkg = "k8s.io/apimachinery/pkg/runtime"
	extV1      = "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	extV1beta1 = "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1beta1"
)

// specials are recognised by package path and type name.
var specials = map[string]string{
	metaPkg + ".Time":                                 "time",
	metaPkg + ".MicroTime":                            "microtime",
	metaPkg + ".Duration":                             "duration",
	metaPkg + ".FieldsV1":                             "rawjson",
	metaPkg + ".TypeMeta":                             "typemeta",
	runtimePkg + ".RawExtension":                      "rawjson",
	"k8s.io/apimachinery/pkg/api/resource.Quantity":   "quantity",
	"k8s.io/apimachinery/pkg/util/intstr.IntOrString": "intorstring",
	extV1 + ".JSON":                                   "json",
	extV1 + ".JSONSchemaPropsOrBool":                  "orbool",
	extV1 + ".JSONSchemaPropsOrArray":                 "orarray",
	extV1 + ".JSONSchemaPropsOrStringArray":           "orstringarray",
	extV1beta1 + ".JSON":                              "json",
	extV1beta1 + ".JSONSchemaPropsOrBool":             "orbool",
	extV1beta1 + ".JSONSchemaPropsOrArray":            "orarray",
	extV1beta1 + ".JSONSchemaPropsOrStringArray":      "orstringarray",
}

// opaque specials have no usable struct fields: Rust handles them whole.
var opaque = map[string]bool{"time": true, "microtime": true, "quantity": true}

type typeDef struct {
	Special string  `json:"special,omitempty"`
	Fields  [][]any `json:"fields"`
}

type walker struct {
	types    map[string]*typeDef
	failures map[string]string
}

func typeName(t reflect.Type) string { return t.PkgPath() + "." + t.Name() }

var (
	jsonMarshaler  = reflect.TypeOf((*json.Marshaler)(nil)).Elem()
	protoMarshaler = reflect.TypeOf((*interface{ Marshal() ([]byte, error) })(nil)).Elem()
)

// ref returns the type expression for t, walking named structs it reaches.
func (w *walker) ref(t reflect.Type) (string, error) {
	switch t.Kind() {
	case reflect.Pointer:
		inner, err := w.ref(t.Elem())
		return "*" + inner, err
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			if t.Name() != "" && t.PkgPath() != "" && reflect.PointerTo(t).Implements(protoMarshaler) {
				return "", fmt.Errorf("named byte slice %s with its own Marshal", typeName(t))
			}
			return "bytes", nil
		}
		if t.Name() != "" && reflect.PointerTo(t).Implements(protoMarshaler) {
			// A named slice that protobuf sees as a message {repeated items = 1}
			// and JSON sees as the plain slice (authentication's ExtraValue).
			name := typeName(t)
			if _, seen := w.types[name]; !seen {
				w.types[name] = &typeDef{Special: "wrapslice"}
				inner, err := w.ref(reflect.SliceOf(t.Elem()))
				if err != nil {
					return "", err
				}
				w.types[name].Fields = [][]any{{"items", "", 1, "bytes", inner}}
			}
			return name, nil
		}
		inner, err := w.ref(t.Elem())
		return "[]" + inner, err
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return "", fmt.Errorf("map with non-string key %s", t)
		}
		inner, err := w.ref(t.Elem())
		return "map:" + inner, err
	case reflect.Struct:
		return typeName(t), w.walk(t)
	case reflect.String:
		return "string", checkNoMarshaler(t)
	case reflect.Bool, reflect.Int32, reflect.Int64, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return t.Kind().String(), checkNoMarshaler(t)
	}
	return "", fmt.Errorf("unsupported Go type %s (%s)", t, t.Kind())
}

func checkNoMarshaler(t reflect.Type) error {
	if t.Implements(jsonMarshaler) || reflect.PointerTo(t).Implements(jsonMarshaler) {
		return fmt.Errorf("basic type %s has its own MarshalJSON", t)
	}
	return nil
}

func (w *walker) walk(t reflect.Type) error {
	name := typeName(t)
	if _, seen := w.types[name]; seen {
		return nil
	}
	def := &typeDef{Special: specials[name], Fields: [][]any{}}
	w.types[name] = def
	if def.Special == "" && (t.Implements(jsonMarshaler) || reflect.PointerTo(t).Implements(jsonMarshaler)) {
		return fmt.Errorf("struct %s has a MarshalJSON this program does not know", name)
	}
	if opaque[def.Special] {
		return nil
	}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		jsonTag := f.Tag.Get("json")
		if jsonTag == "-" {
			// The special types keep their payload in a json:"-" field that protobuf
			// still carries (RawExtension.Raw, FieldsV1.Raw, JSON.Raw).
			if def.Special == "" || f.Tag.Get("protobuf") == "" {
				continue
			}
			jsonTag = strings.ToLower(f.Name)
		}
		parts := strings.Split(jsonTag, ",")
		jname, flags := parts[0], ""
		for _, opt := range parts[1:] {
			switch opt {
			case "omitempty":
				flags += "o"
			case "inline", "":
			default:
				return fmt.Errorf("%s.%s: json option %q not supported", name, f.Name, opt)
			}
		}
		if f.Anonymous && jname == "" {
			if f.Type.Kind() != reflect.Struct {
				return fmt.Errorf("%s.%s: embedded non-struct %s", name, f.Name, f.Type)
			}
			flags += "i"
		} else if jname == "" {
			jname = f.Name
		}
		tag, wire := 0, ""
		if pb := f.Tag.Get("protobuf"); pb != "" {
			pp := strings.Split(pb, ",")
			if len(pp) < 2 {
				return fmt.Errorf("%s.%s: bad protobuf tag %q", name, f.Name, pb)
			}
			n, err := strconv.Atoi(pp[1])
			if err != nil {
				return fmt.Errorf("%s.%s: bad protobuf tag %q", name, f.Name, pb)
			}
			tag, wire = n, pp[0]
			// Map entries are always {1: key, 2: value}; metav1 does not even
			// carry protobuf_key/protobuf_val tags.
		} else if specials[typeName(f.Type)] != "typemeta" {
			return fmt.Errorf("%s.%s: field without a protobuf tag", name, f.Name)
		}
		ty, err := w.ref(f.Type)
		if err != nil {
			return fmt.Errorf("%s.%s: %w", name, f.Name, err)
		}
		def.Fields = append(def.Fields, []any{jname, flags, tag, wire, ty})
	}
	return nil
}

func main() {
	out := flag.String("out", "", "output file (default stdout)")
	flag.Parse()

	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		scheme.AddToScheme, apiextv1.AddToScheme, apiextv1beta1.AddToScheme,
		aggv1.AddToScheme, aggv1beta1.AddToScheme,
	} {
		if err := add(s); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}

	w := &walker{types: map[string]*typeDef{}, failures: map[string]string{}}
	kinds := [][]string{}
	for gvk, t := range s.AllKnownTypes() {
		if gvk.Version == runtime.APIVersionInternal || t.PkgPath() == metaPkg || strings.HasPrefix(t.PkgPath(), "k8s.io/apimachinery/pkg/apis/meta/") {
			continue
		}
		// Walk into a scratch copy so a failing kind leaves no half-walked types.
		scratch := &walker{types: map[string]*typeDef{}}
		for k, v := range w.types {
			scratch.types[k] = v
		}
		if err := scratch.walk(t); err != nil {
			w.failures[gvk.GroupVersion().String()+" "+gvk.Kind] = err.Error()
			continue
		}
		w.types = scratch.types
		kinds = append(kinds, []string{gvk.GroupVersion().String(), gvk.Kind, typeName(t)})
	}
	sort.Slice(kinds, func(i, j int) bool {
		if kinds[i][0] != kinds[j][0] {
			return kinds[i][0] < kinds[j][0]
		}
		return kinds[i][1] < kinds[j][1]
	})
	failed := make([]string, 0, len(w.failures))
	for k, v := range w.failures {
		failed = append(failed, k+": "+v)
	}
	sort.Strings(failed)
	for _, f := range failed {
		fmt.Fprintln(os.Stderr, "skipped", f)
	}

	// encoding/json sorts map keys, so "types" comes out sorted; one type a line.
	var b strings.Builder
	b.WriteString("{\"schema\":\"k8s-1.31\",\n\"kinds\":[\n")
	for i, k := range kinds {
		line, _ := json.Marshal(k)
		b.Write(line)
		if i+1 < len(kinds) {
			b.WriteString(",")
		}
		b.WriteString("\n")
	}
	b.WriteString("],\n\"types\":{\n")
	names := make([]string, 0, len(w.types))
	for n := range w.types {
		names = append(names, n)
	}
	sort.Strings(names)
	for i, n := range names {
		key, _ := json.Marshal(n)
		val, err := json.Marshal(w.types[n])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		b.Write(key)
		b.WriteString(":")
		b.Write(val)
		if i+1 < len(names) {
			b.WriteString(",")
		}
		b.WriteString("\n")
	}
	b.WriteString("}}\n")
	fmt.Fprintf(os.Stderr, "%d kinds, %d types, %d skipped\n", len(kinds), len(names), len(failed))
	if *out == "" {
		os.Stdout.WriteString(b.String())
		return
	}
	if err := os.WriteFile(*out, []byte(b.String()), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
