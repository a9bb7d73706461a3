// Command apistore-reference runs k8s.io/apiserver v0.31.1's own etcd3 storage, put
// together the way kube-apiserver puts it together, behind a line protocol: each line
// read from stdin is one JSON request, each line written to stdout is its answer.
//
// The differential tests in interop/tests drive it beside apistore against one etcd,
// so that every value, continue token, resourceVersion and error seen by one side can
// be checked against the other. Failures come back as the Status kube-apiserver would
// send: the storage error interpreted as the generic registry does, then turned into a
// Status as the endpoint handlers do.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apiserver/pkg/server/options/encryptionconfig"
	serverstorage "k8s.io/apiserver/pkg/server/storage"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/apiserver/pkg/storage/storagebackend/factory"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/klog/v2"
)

// options are the command's flags.
type options struct {
	endpoints        string
	prefix           string
	resource         string
	resourcePrefix   string
	mediaType        string
	encryptionConfig string
	kind             string
	kmsRelay         string
}

func main() {
	var opts options
	flag.StringVar(&opts.endpoints, "endpoints", "http://127.0.0.1:2379", "etcd client URLs, comma separated")
	flag.StringVar(&opts.prefix, "prefix", "/registry", "key prefix (kube-apiserver's --etcd-prefix)")
	flag.StringVar(&opts.resource, "resource", "configmaps", "group resource, e.g. configmaps, secrets, deployments.apps")
	flag.StringVar(&opts.resourcePrefix, "resource-prefix", "", "resource prefix as the registry sets it (default: /<resource>)")
	flag.StringVar(&opts.mediaType, "media-type", "json", "storage media type: json or protobuf")
	flag.StringVar(&opts.encryptionConfig, "encryption-config", "", "EncryptionConfiguration file (kube-apiserver's --encryption-provider-config)")
	flag.StringVar(&opts.kind, "kind", "v1/ConfigMap", "the kind objects decode into: [group/]version/Kind")
	flag.StringVar(&opts.kmsRelay, "kms-relay", "", "<listen socket>=<plugin socket>: relay KMS v2 calls from the first socket to the plugin on the second (see kmsrelay.go)")
	klog.InitFlags(nil)
	flag.Parse()

	if opts.kmsRelay != "" {
		if err := startKMSRelay(opts.kmsRelay); err != nil {
			fmt.Fprintf(os.Stderr, "apistore-reference: %v\n", err)
			os.Exit(2)
		}
	}

	h, err := newHarness(context.Background(), opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "apistore-reference: %v\n", err)
		os.Exit(2)
	}
	defer h.destroy()
	if err := serve(h, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "apistore-reference: %v\n", err)
		os.Exit(1)
	}
}

// harness is one storage.Interface for one resource, and what it needs to make objects.
type harness struct {
	store         storage.Interface
	destroy       factory.DestroyFunc
	groupResource schema.GroupResource
	gvk           schema.GroupVersionKind
}

func newHarness(ctx context.Context, opts options) (*harness, error) {
	gvk, err := parseKind(opts.kind)
	if err != nil {
		return nil, err
	}
	groupResource := schema.ParseGroupResource(opts.resource)
	resourcePrefix := opts.resourcePrefix
	if resourcePrefix == "" {
		// The registry's default: the plural alone, also for grouped resources.
		resourcePrefix = "/" + groupResource.Resource
	}

	var mediaType string
	switch opts.mediaType {
	case "json":
		mediaType = runtime.ContentTypeJSON
	case "protobuf":
		mediaType = runtime.ContentTypeProtobuf
	default:
		return nil, fmt.Errorf("-media-type %q: want json or protobuf", opts.mediaType)
	}

	// The storage config as kube-apiserver's etcd options fill it, minus the
	// background work a test harness must not do (compaction, metric polling).
	config := storagebackend.NewDefaultConfig(opts.prefix, nil)
	config.Transport.ServerList = strings.Split(opts.endpoints, ",")
	config.CompactionInterval = 0
	config.DBMetricPollInterval = 0
	config.CountMetricPollPeriod = 0

	codecs := serializer.NewCodecFactory(scheme.Scheme)
	codec, encodeVersioner, err := serverstorage.NewStorageCodec(serverstorage.StorageCodecConfig{
		StorageMediaType:  mediaType,
		StorageSerializer: codecs,
		StorageVersion:    gvk.GroupVersion(),
		MemoryVersion:     gvk.GroupVersion(),
		Config:            *config,
	})
	if err != nil {
		return nil, fmt.Errorf("storage codec: %w", err)
	}
	config.Codec = codec
	config.EncodeVersioner = encodeVersioner

	// Left nil, the factory puts in kube-apiserver's default for resources the
	// encryption config does not name.
	if opts.encryptionConfig != "" {
		encryption, err := encryptionconfig.LoadEncryptionConfig(ctx, opts.encryptionConfig, false, "apistore-reference")
		if err != nil {
			return nil, fmt.Errorf("encryption config: %w", err)
		}
		if t, ok := encryption.Transformers[groupResource]; ok {
			config.Transformer = t
		}
	}

	newFunc := func() runtime.Object {
		obj, err := scheme.Scheme.New(gvk)
		if err != nil {
			panic(err)
		}
		return obj
	}
	listGVK := gvk.GroupVersion().WithKind(gvk.Kind + "List")
	newListFunc := func() runtime.Object {
		obj, err := scheme.Scheme.New(listGVK)
		if err != nil {
			panic(err)
		}
		return obj
	}
	if !scheme.Scheme.Recognizes(gvk) || !scheme.Scheme.Recognizes(listGVK) {
		return nil, fmt.Errorf("-kind %s: not in client-go's scheme (or has no list kind)", gvk)
	}

	store, destroy, err := factory.Create(*config.ForResource(groupResource), newFunc, newListFunc, resourcePrefix)
	if err != nil {
		return nil, fmt.Errorf("storage: %w", err)
	}
	return &harness{store: store, destroy: destroy, groupResource: groupResource, gvk: gvk}, nil
}

// parseKind reads "v1/ConfigMap" or "apps/v1/Deployment".
func parseKind(text string) (schema.GroupVersionKind, error) {
	at := strings.LastIndex(text, "/")
	if at < 0 {
		return schema.GroupVersionKind{}, fmt.Errorf("-kind %q: want [group/]version/Kind", text)
	}
	gv, err := schema.ParseGroupVersion(text[:at])
	if err != nil {
		return schema.GroupVersionKind{}, fmt.Errorf("-kind %q: %w", text, err)
	}
	return gv.WithKind(text[at+1:]), nil
}

// serve answers requests one line at a time until the input ends.
func serve(h *harness, in io.Reader, out io.Writer) error {
	scanner := bufio.NewScanner(in)
	scanner.Buffer(make([]byte, 0, 1<<20), 64<<20)
	writer := bufio.NewWriter(out)
	for scanner.Scan() {
		line := scanner.Bytes()
		if len(strings.TrimSpace(string(line))) == 0 {
			continue
		}
		var resp response
		var req request
		if err := json.Unmarshal(line, &req); err != nil {
			resp = failure(fmt.Errorf("bad request line: %w", err))
		} else {
			resp = h.handle(req)
		}
		encoded, err := json.Marshal(resp)
		if err != nil {
			encoded, _ = json.Marshal(failure(fmt.Errorf("cannot encode the answer: %w", err)))
		}
		writer.Write(encoded)
		writer.WriteByte('\n')
		if err := writer.Flush(); err != nil {
			return err
		}
	}
	return scanner.Err()
}
