package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	"k8s.io/apiserver/pkg/storage"
	storeerr "k8s.io/apiserver/pkg/storage/errors"
	"k8s.io/client-go/kubernetes/scheme"
)

// request is one line of input. Which fields matter depends on op.
type request struct {
	// create, get, update, delete, list, watch or count.
	Op string `json:"op"`
	// The storage key as the registry passes it: /<resource prefix>/<namespace>/<name>.
	Key string `json:"key"`
	// create: the object; update: the replacement (otherwise the current object is kept).
	Object json.RawMessage `json:"object,omitempty"`
	// create: seconds to live.
	TTL uint64 `json:"ttl,omitempty"`
	// get: the minimum resourceVersion; list: the one to list at; watch: to watch from.
	ResourceVersion      string `json:"resourceVersion,omitempty"`
	ResourceVersionMatch string `json:"resourceVersionMatch,omitempty"`
	// get, update.
	IgnoreNotFound bool `json:"ignoreNotFound,omitempty"`
	// update: labels to set on the object.
	Labels map[string]string `json:"labels,omitempty"`
	// update, delete.
	Preconditions *preconditions `json:"preconditions,omitempty"`
	// list, watch: true unless given.
	Recursive     *bool  `json:"recursive,omitempty"`
	Limit         int64  `json:"limit,omitempty"`
	Continue      string `json:"continue,omitempty"`
	LabelSelector string `json:"labelSelector,omitempty"`
	// watch: stop after this many events, or after timeoutMillis (default 3000).
	Events        int `json:"events,omitempty"`
	TimeoutMillis int `json:"timeoutMillis,omitempty"`
}

type preconditions struct {
	UID             *string `json:"uid,omitempty"`
	ResourceVersion *string `json:"resourceVersion,omitempty"`
}

// response is one line of output: ok with what the op returns, or the error's Status.
type response struct {
	OK                 bool              `json:"ok"`
	Object             json.RawMessage   `json:"object,omitempty"`
	Items              []json.RawMessage `json:"items,omitempty"`
	ResourceVersion    string            `json:"resourceVersion,omitempty"`
	Continue           string            `json:"continue,omitempty"`
	RemainingItemCount *int64            `json:"remainingItemCount,omitempty"`
	Events             []event           `json:"events,omitempty"`
	Count              *int64            `json:"count,omitempty"`
	Error              *metav1.Status    `json:"error,omitempty"`
}

type event struct {
	Type   watch.EventType `json:"type"`
	Object json.RawMessage `json:"object"`
}

// failure is the Status kube-apiserver's handlers would answer err with.
func failure(err error) response {
	return response{Error: responsewriters.ErrorToAPIStatus(err)}
}

func (h *harness) handle(req request) response {
	ctx := context.Background()
	name := path.Base(req.Key)
	switch req.Op {
	case "create":
		obj, err := h.decodeRequestObject(req.Object)
		if err != nil {
			return failure(err)
		}
		out := h.newObject()
		if err := h.store.Create(ctx, req.Key, obj, out, req.TTL); err != nil {
			return failure(storeerr.InterpretCreateError(err, h.groupResource, name))
		}
		return h.objectResponse(out)
	case "get":
		out := h.newObject()
		opts := storage.GetOptions{IgnoreNotFound: req.IgnoreNotFound, ResourceVersion: req.ResourceVersion}
		if err := h.store.Get(ctx, req.Key, opts, out); err != nil {
			return failure(storeerr.InterpretGetError(err, h.groupResource, name))
		}
		return h.objectResponse(out)
	case "update":
		return h.update(ctx, req, name)
	case "delete":
		out := h.newObject()
		err := deleteObject(ctx, h.store, req.Key, out, req.Preconditions.storage())
		if err != nil {
			return failure(storeerr.InterpretDeleteError(err, h.groupResource, name))
		}
		return h.objectResponse(out)
	case "list":
		return h.list(ctx, req)
	case "watch":
		return h.watch(ctx, req, name)
	case "count":
		n, err := countObjects(ctx, h.store, req.Key)
		if err != nil {
			return failure(storeerr.InterpretListError(err, h.groupResource))
		}
		return response{OK: true, Count: &n}
	default:
		return failure(fmt.Errorf("unknown op %q", req.Op))
	}
}

func (h *harness) update(ctx context.Context, req request, name string) response {
	var replacement runtime.Object
	if len(req.Object) > 0 {
		obj, err := h.decodeRequestObject(req.Object)
		if err != nil {
			return failure(err)
		}
		replacement = obj
	}
	tryUpdate := func(input runtime.Object, _ storage.ResponseMeta) (runtime.Object, *uint64, error) {
		next := input.DeepCopyObject()
		if replacement != nil {
			next = replacement.DeepCopyObject()
		}
		if len(req.Labels) > 0 {
			accessor, err := meta.Accessor(next)
			if err != nil {
				return nil, nil, err
			}
			merged := accessor.GetLabels()
			if merged == nil {
				merged = map[string]string{}
			}
			for k, v := range req.Labels {
				merged[k] = v
			}
			accessor.SetLabels(merged)
		}
		return next, nil, nil
	}
	out := h.newObject()
	err := h.store.GuaranteedUpdate(ctx, req.Key, out, req.IgnoreNotFound, req.Preconditions.storage(), tryUpdate, nil)
	if err != nil {
		return failure(storeerr.InterpretUpdateError(err, h.groupResource, name))
	}
	return h.objectResponse(out)
}

func (h *harness) predicate(req request) (storage.SelectionPredicate, error) {
	selector := labels.Everything()
	if req.LabelSelector != "" {
		parsed, err := labels.Parse(req.LabelSelector)
		if err != nil {
			return storage.SelectionPredicate{}, err
		}
		selector = parsed
	}
	return storage.SelectionPredicate{
		Label:    selector,
		Field:    fields.Everything(),
		GetAttrs: storage.DefaultNamespaceScopedAttr,
		Limit:    req.Limit,
		Continue: req.Continue,
	}, nil
}

func (req request) recursive() bool {
	return req.Recursive == nil || *req.Recursive
}

func (h *harness) list(ctx context.Context, req request) response {
	pred, err := h.predicate(req)
	if err != nil {
		return failure(err)
	}
	opts := storage.ListOptions{
		ResourceVersion:      req.ResourceVersion,
		ResourceVersionMatch: metav1.ResourceVersionMatch(req.ResourceVersionMatch),
		Predicate:            pred,
		Recursive:            req.recursive(),
	}
	list := h.newList()
	if err := h.store.GetList(ctx, req.Key, opts, list); err != nil {
		return failure(storeerr.InterpretListError(err, h.groupResource))
	}
	listMeta, err := meta.ListAccessor(list)
	if err != nil {
		return failure(err)
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return failure(err)
	}
	resp := response{
		OK:                 true,
		Items:              []json.RawMessage{},
		ResourceVersion:    listMeta.GetResourceVersion(),
		Continue:           listMeta.GetContinue(),
		RemainingItemCount: listMeta.GetRemainingItemCount(),
	}
	for _, item := range items {
		encoded, err := h.encodeObject(item)
		if err != nil {
			return failure(err)
		}
		resp.Items = append(resp.Items, encoded)
	}
	return resp
}

func (h *harness) watch(ctx context.Context, req request, name string) response {
	pred, err := h.predicate(req)
	if err != nil {
		return failure(err)
	}
	timeout := 3 * time.Second
	if req.TimeoutMillis > 0 {
		timeout = time.Duration(req.TimeoutMillis) * time.Millisecond
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := h.store.Watch(ctx, req.Key, storage.ListOptions{
		ResourceVersion: req.ResourceVersion,
		Predicate:       pred,
		Recursive:       req.recursive(),
	})
	if err != nil {
		return failure(storeerr.InterpretWatchError(err, h.groupResource, name))
	}
	defer w.Stop()
	resp := response{OK: true, Events: []event{}}
	deadline := time.After(timeout)
	for req.Events <= 0 || len(resp.Events) < req.Events {
		select {
		case ev, open := <-w.ResultChan():
			if !open {
				return resp
			}
			encoded, err := h.encodeObject(ev.Object)
			if err != nil {
				return failure(err)
			}
			resp.Events = append(resp.Events, event{Type: ev.Type, Object: encoded})
			if ev.Type == watch.Error {
				return resp
			}
		case <-deadline:
			return resp
		}
	}
	return resp
}

func (p *preconditions) storage() *storage.Preconditions {
	if p == nil {
		return nil
	}
	out := &storage.Preconditions{ResourceVersion: p.ResourceVersion}
	if p.UID != nil {
		uid := types.UID(*p.UID)
		out.UID = &uid
	}
	return out
}

func (h *harness) newObject() runtime.Object {
	obj, _ := h.scheme().New(h.gvk)
	return obj
}

func (h *harness) newList() runtime.Object {
	obj, _ := h.scheme().New(h.gvk.GroupVersion().WithKind(h.gvk.Kind + "List"))
	return obj
}

// decodeRequestObject reads a request's object as the typed kind the harness stores.
func (h *harness) decodeRequestObject(raw json.RawMessage) (runtime.Object, error) {
	if len(raw) == 0 {
		return nil, fmt.Errorf("the request has no object")
	}
	obj := h.newObject()
	if err := json.Unmarshal(raw, obj); err != nil {
		return nil, fmt.Errorf("the request's object is not a %s: %w", h.gvk.Kind, err)
	}
	return obj, nil
}

// encodeObject writes an object as JSON with its apiVersion and kind set (a Status
// keeps its own).
func (h *harness) encodeObject(obj runtime.Object) (json.RawMessage, error) {
	if _, isStatus := obj.(*metav1.Status); !isStatus {
		obj = obj.DeepCopyObject()
		obj.GetObjectKind().SetGroupVersionKind(h.gvk)
	}
	return json.Marshal(obj)
}

func (h *harness) objectResponse(obj runtime.Object) response {
	encoded, err := h.encodeObject(obj)
	if err != nil {
		return failure(err)
	}
	return response{OK: true, Object: encoded}
}

func (h *harness) scheme() *runtime.Scheme {
	return scheme.Scheme
}
