//go:build !kube137

// The storage.Interface calls whose signatures changed after k8s.io/apiserver v0.31:
// built by default (go.mod, v0.31.1).

package main

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/storage"
)

// deleteObject deletes key under preconditions, as the generic registry does.
func deleteObject(ctx context.Context, s storage.Interface, key string, out runtime.Object, pre *storage.Preconditions) error {
	return s.Delete(ctx, key, out, pre, storage.ValidateAllObjectFunc, nil)
}

// countObjects counts the objects under key.
func countObjects(_ context.Context, s storage.Interface, key string) (int64, error) {
	return s.Count(key)
}
