// Command etcd is etcd v3.7.3's own server, built from the Go module proxy so that
// apistore's tests run against the etcd versions clusters run (cargo xtask test
// --etcd 3.7, cargo xtask interop). The version is pinned in go.mod. 3.7 is the first
// line whose KV service answers RangeStream, which kube 1.37 lists with.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
