// The bench's reference for reading an etcd snapshot file: etcd's own `etcdutl
// snapshot status`, built from etcd's etcdutl module at the version pinned in go.mod,
// with only the snapshot commands attached to a root command of our own.
package main

import (
	"os"

	"github.com/spf13/cobra"
	"go.etcd.io/etcd/etcdutl/v3/etcdutl"
)

func main() {
	root := &cobra.Command{Use: "etcdutl", SilenceUsage: true}
	root.PersistentFlags().StringVarP(&etcdutl.OutputFormat, "write-out", "w", "simple",
		"output format (simple, json, table)")
	root.AddCommand(etcdutl.NewSnapshotCommand())
	if err := root.Execute(); err != nil {
		os.Exit(1)
	}
}
