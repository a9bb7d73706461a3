//go:build kube137

// The storage.Interface calls whose signatures changed after k8s.io/apiserver v0.31,
// as v0.37 has them: built with `-modfile=go-1.37.mod -tags kube137`.

package main

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/storage"
)

// deleteObject deletes key under preconditions, as the generic registry does (a
// normal delete: no ExpectTransformOrDecodeError).
func deleteObject(ctx context.Context, s storage.Interface, key string, out runtime.Object, pre *storage.Preconditions) error {
	return s.Delete(ctx, key, out, pre, storage.ValidateAllObjectFunc, nil, storage.DeleteOptions{})
}

// countObjects counts the objects of the store's resource: v0.34 replaced Count(key)
// with Stats, which counts the store's whole resource prefix (the harness serves one).
func countObjects(ctx context.Context, s storage.Interface, _ string) (int64, error) {
	stats, err := s.Stats(ctx)
	return stats.ObjectCount, err
}
