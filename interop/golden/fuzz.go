package main

// Fuzzer functions added to apimachinery's meta fuzzer functions, so that fuzzed
// objects hold what a real object can hold: valid JSON wherever a field carries raw
// JSON (FieldsV1, apiextensions' JSON), CRD schemas that end, and the
// one-of wrappers of JSONSchemaProps in the shapes their MarshalJSON can express.

import (
	"fmt"
	"strconv"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsv1beta1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1beta1"
	metafuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeserializer "k8s.io/apimachinery/pkg/runtime/serializer"
)

// maxSchemaDepth bounds how deep a fuzzed JSONSchemaProps nests: it has a dozen
// recursive fields, so left alone the fuzzer builds trees that do not end.
const maxSchemaDepth = 2

var schemaDepth int

// goldenFuzzerFuncs returns the functions below as functions of the Continue type
// apimachinery's meta fuzzer functions take (see filler.go).
func goldenFuzzerFuncs(codecs runtimeserializer.CodecFactory) ([]interface{}, error) {
	c, err := continueType(metafuzzer.Funcs(codecs))
	if err != nil {
		return nil, err
	}
	return adapt(c, []interface{}{
		func(j *metav1.ManagedFieldsEntry, c cont) {
			c.FuzzNoCustom(j)
			if c.RandBool() {
				j.FieldsV1 = nil
			} else {
				j.FieldsV1 = &metav1.FieldsV1{Raw: []byte(randomFieldsV1(c))}
			}
		},

		func(j *apiextensionsv1.JSON, c cont) {
			j.Raw = []byte(randomJSON(c, 0))
		},
		func(p *apiextensionsv1.JSONSchemaProps, c cont) {
			schemaDepth++
			defer func() { schemaDepth-- }()
			if schemaDepth > maxSchemaDepth {
				*p = apiextensionsv1.JSONSchemaProps{}
				c.Fuzz(&p.Type)
				c.Fuzz(&p.Description)
				c.Fuzz(&p.Format)
				c.Fuzz(&p.Maximum)
				c.Fuzz(&p.MaxLength)
				c.Fuzz(&p.Nullable)
				c.Fuzz(&p.Default)
				return
			}
			c.FuzzNoCustom(p)
		},
		func(s *apiextensionsv1.JSONSchemaPropsOrBool, c cont) {
			if c.RandBool() {
				s.Allows = c.RandBool()
				s.Schema = nil
				return
			}
			s.Allows = true
			s.Schema = &apiextensionsv1.JSONSchemaProps{}
			c.Fuzz(s.Schema)
		},
		func(s *apiextensionsv1.JSONSchemaPropsOrArray, c cont) {
			if c.RandBool() {
				s.Schema = &apiextensionsv1.JSONSchemaProps{}
				c.Fuzz(s.Schema)
				s.JSONSchemas = nil
				return
			}
			s.Schema = nil
			s.JSONSchemas = make([]apiextensionsv1.JSONSchemaProps, 1+c.Intn(2))
			for i := range s.JSONSchemas {
				c.Fuzz(&s.JSONSchemas[i])
			}
		},
		func(s *apiextensionsv1.JSONSchemaPropsOrStringArray, c cont) {
			if c.RandBool() {
				s.Schema = &apiextensionsv1.JSONSchemaProps{}
				c.Fuzz(s.Schema)
				s.Property = nil
				return
			}
			s.Schema = nil
			s.Property = []string{c.RandString()}
		},

		func(j *apiextensionsv1beta1.JSON, c cont) {
			j.Raw = []byte(randomJSON(c, 0))
		},
		func(p *apiextensionsv1beta1.JSONSchemaProps, c cont) {
			schemaDepth++
			defer func() { schemaDepth-- }()
			if schemaDepth > maxSchemaDepth {
				*p = apiextensionsv1beta1.JSONSchemaProps{}
				c.Fuzz(&p.Type)
				c.Fuzz(&p.Description)
				c.Fuzz(&p.Format)
				c.Fuzz(&p.Minimum)
				c.Fuzz(&p.MinItems)
				c.Fuzz(&p.XIntOrString)
				c.Fuzz(&p.Example)
				return
			}
			c.FuzzNoCustom(p)
		},
		func(s *apiextensionsv1beta1.JSONSchemaPropsOrBool, c cont) {
			if c.RandBool() {
				s.Allows = c.RandBool()
				s.Schema = nil
				return
			}
			s.Allows = true
			s.Schema = &apiextensionsv1beta1.JSONSchemaProps{}
			c.Fuzz(s.Schema)
		},
		func(s *apiextensionsv1beta1.JSONSchemaPropsOrArray, c cont) {
			if c.RandBool() {
				s.Schema = &apiextensionsv1beta1.JSONSchemaProps{}
				c.Fuzz(s.Schema)
				s.JSONSchemas = nil
				return
			}
			s.Schema = nil
			s.JSONSchemas = make([]apiextensionsv1beta1.JSONSchemaProps, 1+c.Intn(2))
			for i := range s.JSONSchemas {
				c.Fuzz(&s.JSONSchemas[i])
			}
		},
		func(s *apiextensionsv1beta1.JSONSchemaPropsOrStringArray, c cont) {
			if c.RandBool() {
				s.Schema = &apiextensionsv1beta1.JSONSchemaProps{}
				c.Fuzz(s.Schema)
				s.Property = nil
				return
			}
			s.Schema = nil
			s.Property = []string{c.RandString()}
		},
	})
}

// randomJSON returns a JSON value as text. It is not always in the compact form
// encoding/json writes (it may hold spaces, and characters encoding/json escapes),
// so that the normalising pass has something to do and the fixtures show what
// compaction looks like.
func randomJSON(c cont, depth int) string {
	kinds := 7
	if depth >= 2 {
		kinds = 5
	}
	switch c.Intn(kinds) {
	case 0:
		return "null"
	case 1:
		return strconv.FormatBool(c.RandBool())
	case 2:
		return strconv.FormatInt(c.Int63n(1<<40)-1<<39, 10)
	case 3:
		return strconv.FormatFloat(c.Float64()*1e6, 'g', -1, 64)
	case 4:
		return quoteJSON(c.RandString())
	case 5:
		n := c.Intn(3)
		parts := make([]string, n)
		for i := range parts {
			parts[i] = randomJSON(c, depth+1)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	default:
		n := c.Intn(3)
		parts := make([]string, n)
		for i := range parts {
			parts[i] = quoteJSON(c.RandString()) + ": " + randomJSON(c, depth+1)
		}
		return "{" + strings.Join(parts, ",") + "}"
	}
}

// randomFieldsV1 returns a managedFields fieldsV1 document, shaped like the ones
// the structured-merge-diff library writes.
func randomFieldsV1(c cont) string {
	n := 1 + c.Intn(3)
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf("%s:{}", quoteJSON("f:"+c.RandString()))
	}
	return `{"f:metadata":{"f:labels":{".":{},` + strings.Join(parts, ",") + `}},"f:spec":{}}`
}

// quoteJSON quotes s as a JSON string without escaping the characters
// encoding/json escapes for HTML (those are left for encoding/json to escape).
func quoteJSON(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r < 0x20:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
