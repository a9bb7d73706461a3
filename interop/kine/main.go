// Command kine is k3s-io/kine's own server (kine's main.go, which is package main and
// so cannot be imported), built from the Go module proxy so that apistore's etcd3
// backend runs against the etcd shim k3s runs kube-apiserver on (cargo xtask test
// --backend kine-sqlite, cargo xtask interop). The version is pinned in go.mod; the
// SQLite driver is mattn/go-sqlite3 and needs cgo.
package main

import (
	"context"
	"errors"
	"os"

	"github.com/k3s-io/kine/pkg/app"
	"github.com/sirupsen/logrus"
)

func main() {
	if err := app.New().Run(os.Args); err != nil && !errors.Is(err, context.Canceled) {
		logrus.Fatal(err)
	}
}
