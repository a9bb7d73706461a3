// Command schema writes the protobuf/JSON schema that crates/apistore-protobuf
// embeds: for every kind registered in client-go's scheme plus apiextensions.k8s.io
// and apiregistration.k8s.io, the Go struct layout of its type seen through
// reflection (JSON name, omitempty, inline, protobuf tag, type shape), in Go field
// declaration order.
//
// One program serves every kube minor: each minor has its own modfile (go-1.3X.mod,
// with go-1.3X.sum beside it) and the schema is named after the k8s.io/api version
// the binary was built with (README.md has the loop):
//
//	go run -modfile=go-1.37.mod . -out ../../crates/apistore-protobuf/schema/k8s-1.37.json
//
// The output format (all lists sorted, so the file is deterministic):
//
//	{"schema": "k8s-1.31",
//	 "modules": {modulePath: version, ...},
//	 "kinds": [[apiVersion, kind, typeName], ...],
//	 "types": {typeName: {"special": name?, "fields": [[json, flags, tag, wire, type], ...]}}}
//
// modules records the k8s.io module versions the file was generated from.
// typeName is "<package path>.<Go type name>". flags holds 'o' for omitempty, 'z' for
// omitzero and 'i' for an embedded struct flattened into its parent's JSON object, in
// that order. With 'z' encoding/json leaves the field out when it is zero: for the
// "time" and "microtime" specials (through their IsZero) when it holds the zero
// instant, for any other type when it is Go's zero value (nil pointer, slice or map,
// "", 0, false, a struct whose fields are all zero); the program refuses omitzero on
// any other type with an IsZero method. tag is the protobuf
// field number (0 for the inline TypeMeta, which protobuf does not carry) and wire the
// first element of the protobuf struct tag. type is one of: string, bool, int32,
// int64, uint32, uint64, float32, float64, bytes, a typeName, "*"+type, "[]"+type or
// "map:"+type (string keys). special names the types whose JSON or protobuf form is
// written by hand in Go rather than derived from their fields.
package main

import (
	"encoding"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"reflect"
	"runtime/debug"
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
	// Hand-written JSON forms: any of these on a type the specials map does not
	// name means its JSON is not what its fields say (encoding/json honours the
	// Text methods too, writing the value as a string).
	handWritten = []reflect.Type{
		jsonMarshaler,
		reflect.TypeOf((*json.Unmarshaler)(nil)).Elem(),
		reflect.TypeOf((*encoding.TextMarshaler)(nil)).Elem(),
		reflect.TypeOf((*encoding.TextUnmarshaler)(nil)).Elem(),
	}
)

// handWrittenJSON names the JSON method t or *t has, or returns "".
func handWrittenJSON(t reflect.Type) string {
	for _, m := range handWritten {
		if t.Implements(m) || reflect.PointerTo(t).Implements(m) {
			return m.Method(0).Name
		}
	}
	return ""
}

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
			return "bytes", checkNoMarshaler(t)
		}
		if err := checkNoMarshaler(t); err != nil {
			return "", err
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
		if err := checkNoMarshaler(t); err != nil {
			return "", err
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
	if m := handWrittenJSON(t); m != "" {
		return fmt.Errorf("type %s has its own %s", t, m)
	}
	return nil
}

var isZeroer = reflect.TypeOf((*interface{ IsZero() bool })(nil)).Elem()

// zeroBySpecial are the specials whose IsZero the 'z' flag stands for: the zero
// instant (0001-01-01T00:00:00Z), which both write as JSON null.
var zeroBySpecial = map[string]bool{"time": true, "microtime": true}

// checkOmitZero refuses an omitzero field whose zero test the format cannot say.
// encoding/json uses the field type's IsZero() bool when the type, or for a non-
// pointer type its pointer, has one (a nil pointer is zero without calling it);
// otherwise reflect's zero value. The schema's 'z' means exactly that for the time
// specials, and reflect's zero value for everything else.
func checkOmitZero(t reflect.Type) error {
	base := t
	if base.Kind() == reflect.Pointer {
		base = base.Elem()
	}
	if !t.Implements(isZeroer) && !reflect.PointerTo(t).Implements(isZeroer) && !reflect.PointerTo(base).Implements(isZeroer) {
		return nil
	}
	if base.Kind() == reflect.Struct && zeroBySpecial[specials[typeName(base)]] {
		return nil
	}
	return fmt.Errorf("omitzero on %s, whose IsZero method the schema cannot express", t)
}

func (w *walker) walk(t reflect.Type) error {
	name := typeName(t)
	if _, seen := w.types[name]; seen {
		return nil
	}
	def := &typeDef{Special: specials[name], Fields: [][]any{}}
	w.types[name] = def
	if def.Special == "" {
		if m := handWrittenJSON(t); m != "" {
			return fmt.Errorf("struct %s has a %s this program does not know", name, m)
		}
		// Generated API structs have only exported fields; an unexported one is a
		// sign of a hand-written protobuf form (as metav1.Time and Quantity have).
		for i := 0; i < t.NumField(); i++ {
			if !t.Field(i).IsExported() {
				return fmt.Errorf("struct %s has unexported field %s: a hand-written type this program does not know", name, t.Field(i).Name)
			}
		}
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
			if f.Tag.Get("protobuf") == "" {
				continue
			}
			if def.Special == "" {
				// Protobuf would carry a field JSON never shows: not a shape the
				// schema can say.
				return fmt.Errorf("%s.%s: json:\"-\" field with a protobuf tag", name, f.Name)
			}
			jsonTag = strings.ToLower(f.Name)
		}
		parts := strings.Split(jsonTag, ",")
		jname, flags := parts[0], ""
		omitEmpty, omitZero := false, false
		for _, opt := range parts[1:] {
			switch opt {
			case "omitempty":
				omitEmpty = true
			case "omitzero":
				omitZero = true
			case "inline", "":
			default:
				return fmt.Errorf("%s.%s: json option %q not supported", name, f.Name, opt)
			}
		}
		if omitEmpty {
			flags += "o"
		}
		if omitZero {
			if err := checkOmitZero(f.Type); err != nil {
				return fmt.Errorf("%s.%s: %w", name, f.Name, err)
			}
			flags += "z"
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

// modulePaths are the modules whose versions the output records.
var modulePaths = []string{
	"k8s.io/api", "k8s.io/apimachinery", "k8s.io/client-go",
	"k8s.io/apiextensions-apiserver", "k8s.io/kube-aggregator",
}

// buildModules returns the versions of modulePaths this binary was built with, and
// the schema name derived from k8s.io/api's (v0.X.Y is kube 1.X).
func buildModules() (map[string]string, string, error) {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return nil, "", fmt.Errorf("no build information in the binary")
	}
	versions := map[string]string{}
	for _, d := range info.Deps {
		if d.Replace != nil {
			return nil, "", fmt.Errorf("module %s is replaced", d.Path)
		}
		versions[d.Path] = d.Version
	}
	mods := map[string]string{}
	for _, p := range modulePaths {
		v, ok := versions[p]
		if !ok {
			return nil, "", fmt.Errorf("module %s not in the build", p)
		}
		mods[p] = v
	}
	parts := strings.Split(strings.TrimPrefix(mods["k8s.io/api"], "v"), ".")
	if len(parts) < 2 || parts[0] != "0" {
		return nil, "", fmt.Errorf("k8s.io/api version %s is not v0.X.Y", mods["k8s.io/api"])
	}
	minor := parts[1]
	for p, v := range mods {
		if pp := strings.Split(strings.TrimPrefix(v, "v"), "."); len(pp) < 2 || pp[1] != minor {
			return nil, "", fmt.Errorf("module %s %s is not of minor 0.%s like k8s.io/api", p, v, minor)
		}
	}
	return mods, "k8s-1." + minor, nil
}

func main() {
	out := flag.String("out", "", "output file (default stdout)")
	keepGoing := flag.Bool("keep-going", false, "write the schema even when kinds had to be skipped")
	flag.Parse()

	mods, schemaName, err := buildModules()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}

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
	name, _ := json.Marshal(schemaName)
	modules, _ := json.Marshal(mods)
	fmt.Fprintf(&b, "{\"schema\":%s,\n\"modules\":%s,\n\"kinds\":[\n", name, modules)
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
	fmt.Fprintf(os.Stderr, "%s: %d kinds, %d types, %d skipped\n", schemaName, len(kinds), len(names), len(failed))
	if len(failed) > 0 && !*keepGoing {
		fmt.Fprintln(os.Stderr, "not writing a schema that leaves kinds out (-keep-going writes it anyway)")
		os.Exit(1)
	}
	if *out == "" {
		os.Stdout.WriteString(b.String())
		return
	}
	if err := os.WriteFile(*out, []byte(b.String()), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
