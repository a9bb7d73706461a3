// Command etcd is etcd v3.5.35's own server, built from the Go module proxy so that
// apistore's tests run against the etcd versions clusters run (cargo xtask test
// --etcd 3.5, cargo xtask interop). The version is pinned in go.mod.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
