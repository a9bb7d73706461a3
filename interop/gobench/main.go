// Command apistore-gobench is the kube arm of `cargo xtask bench`: the workloads the
// Rust harness runs through apistore, run here through k8s.io/apiserver v0.37.2's own
// etcd3 store, composed as kube-apiserver composes it for Pods stored as protobuf
// (storagebackend.Config, factory.Create, the storage codec of
// server/storage.NewStorageCodec over client-go's scheme).
//
// It holds no data of its own: the harness writes the Pods into the same etcd and then
// drives this program one request at a time, a JSON line on stdin answered by a JSON
// line on stdout, alternating with its own arms round after round so that each ratio
// apistore/kube is measured back to back in one run. Timing happens here, around the
// storage.Interface calls only, as the harness times its own calls.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"k8s.io/klog/v2"
)

func main() {
	endpoints := flag.String("endpoints", "http://127.0.0.1:2379", "etcd client URLs, comma separated")
	prefix := flag.String("prefix", "/registry", "key prefix (kube-apiserver's --etcd-prefix)")
	klog.InitFlags(nil)
	flag.Parse()

	b, err := newBench(strings.Split(*endpoints, ","), *prefix)
	if err != nil {
		fmt.Fprintf(os.Stderr, "apistore-gobench: %v\n", err)
		os.Exit(2)
	}
	defer b.close()
	if err := serve(context.Background(), b, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "apistore-gobench: %v\n", err)
		os.Exit(1)
	}
}

// serve answers requests, one JSON value each, until the input ends or a quit
// request; json.Encoder ends each answer with a newline and writes it at once.
func serve(ctx context.Context, b *bench, in io.Reader, out io.Writer) error {
	decoder := json.NewDecoder(in)
	encoder := json.NewEncoder(out)
	for {
		var req request
		if err := decoder.Decode(&req); err == io.EOF {
			return nil
		} else if err != nil {
			return fmt.Errorf("bad request: %w", err)
		}
		if req.Op == "quit" {
			return nil
		}
		if err := encoder.Encode(b.handle(ctx, req)); err != nil {
			return err
		}
	}
}
