package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/reconcilekit/reconcilekit/conditions"
	"github.com/reconcilekit/reconcilekit/reconciler"

	webappv2 "github.com/reconcilekit/reconcilekit/examples/webapp/api/v2"
)

// The route registry lists every WebApp's in-cluster address (key
// "<namespace>.<name>", value "http://<service>.<namespace>.svc:80") in
// RegistryShards ConfigMaps in the operator's namespace,
// webapp-registry-00 to webapp-registry-15, labelled RegistryLabel. A
// WebApp's entry is in the shard RegistryShard names; a shared gateway or
// a service catalogue reads the union of the shards
// (kubectl get configmaps -l apps.example.com/route-registry).
//
// It is why the WebApp has a finalizer: owner references cannot clean it
// up. The registry lives in another namespace (owner references never
// cross namespaces) and is shared by many WebApps (deleting an owner
// deletes whole objects, never one key of one). Without the finalizer a
// deleted WebApp would stay routable forever.
//
// One ConfigMap for every WebApp stopped working at about 10,000 WebApps
// (a ConfigMap's data is limited to 1 MiB); sixteen shards hold over
// 60,000 WebApps even with the longest names (TestRegistryShardCapacity).
const (
	// RegistryShards is the number of registry ConfigMaps. Changing it
	// moves entries between shards: it is fixed for the operator's life.
	RegistryShards = 16
	// RegistryShardPrefix prefixes the shards' names: webapp-registry-00.
	RegistryShardPrefix = "webapp-registry-"
	// RegistryLabel marks the shards (value "shard"), for readers.
	RegistryLabel = "apps.example.com/route-registry"
	// LegacyRegistryName is the single registry ConfigMap of earlier
	// versions. Each WebApp's register step moves its entry out of it,
	// and the last one deletes it once empty.
	LegacyRegistryName = "webapp-registry"
)

// The RBAC markers name the shards: keep them equal to RegistryShardNames
// (TestRBACNamesEveryShard). Writes are limited by name: patch on the
// shards, patch and delete on the legacy registry; create cannot be (the
// apiserver authorizes a POST before the new object's name is known). The
// shards are read from the manager's cache, which lists and watches the
// ConfigMaps labelled managed-by=webapp-operator in the operator's
// namespace only (CacheOptions): list/watch cannot be limited to sixteen
// names by one informer (a list matches resourceNames only with a
// metadata.name field selector, one name), and that namespace holds the
// operator's own objects, no credentials (its Secret is not a ConfigMap),
// so reading its ConfigMaps reveals nothing another tenant owns. Sixteen
// field-selected informers would narrow it at sixteen watches per replica.
// +kubebuilder:rbac:groups=core,resources=configmaps,verbs=patch,namespace=webapp-system,resourceNames=webapp-registry-00;webapp-registry-01;webapp-registry-02;webapp-registry-03;webapp-registry-04;webapp-registry-05;webapp-registry-06;webapp-registry-07;webapp-registry-08;webapp-registry-09;webapp-registry-10;webapp-registry-11;webapp-registry-12;webapp-registry-13;webapp-registry-14;webapp-registry-15
// +kubebuilder:rbac:groups=core,resources=configmaps,verbs=patch;delete,namespace=webapp-system,resourceNames=webapp-registry
// +kubebuilder:rbac:groups=core,resources=configmaps,verbs=create;list;watch,namespace=webapp-system

// RegistryShard is the name of the shard holding the entry of the WebApp
// namespace/name: fnv-32a of "<namespace>/<name>" modulo RegistryShards.
func RegistryShard(namespace, name string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(namespace + "/" + name))
	return shardName(int(h.Sum32() % RegistryShards))
}

// RegistryShardNames lists the names of all shards, in order.
func RegistryShardNames() []string {
	names := make([]string, RegistryShards)
	for i := range names {
		names[i] = shardName(i)
	}
	return names
}

func shardName(i int) string { return fmt.Sprintf("%s%02d", RegistryShardPrefix, i) }

// isShard reports whether name is one of the shards' names.
func isShard(name string) bool {
	n, ok := strings.CutPrefix(name, RegistryShardPrefix)
	if !ok || len(n) != 2 || n[0] < '0' || n[0] > '9' || n[1] < '0' || n[1] > '9' {
		return false
	}
	i, err := strconv.Atoi(n)
	return err == nil && i < RegistryShards
}

// RegistryKey is the registry key of the WebApp namespace/name.
func RegistryKey(namespace, name string) string { return namespace + "." + name }

// RegistryValue is the registry value of the WebApp namespace/name: the
// address of its Service.
func RegistryValue(namespace, name string) string {
	return "http://" + name + "." + namespace + ".svc:80"
}

// parseKey splits a registry key at its first dot: namespaces have none.
func parseKey(key string) (types.NamespacedName, bool) {
	ns, name, ok := strings.Cut(key, ".")
	return types.NamespacedName{Namespace: ns, Name: name}, ok && ns != "" && name != ""
}

// registry maintains the WebApp's entry in the shared route registry.
type registry struct {
	namespace string
}

func registryKey(app *webappv2.WebApp) string { return RegistryKey(app.Namespace, app.Name) }

func registryValue(app *webappv2.WebApp) string { return RegistryValue(app.Namespace, app.Name) }

// register adds or updates this WebApp's key in its shard with a merge
// patch that touches only that key, so concurrent reconciles of other
// WebApps never overwrite each other, and writes nothing when the entry is
// current. Then it removes the key from the legacy registry, if that still
// exists: the new entry is written first, so readers of both never miss
// the WebApp during an upgrade.
func (r registry) register(ctx context.Context, s *scope) reconciler.Outcome {
	shard := RegistryShard(s.Object.Namespace, s.Object.Name)
	if err := r.set(ctx, s.Client, shard, registryKey(s.Object), registryValue(s.Object)); err != nil {
		return reconciler.Retry(err)
	}
	if err := r.migrate(ctx, s.Client, registryKey(s.Object), true); err != nil {
		return reconciler.Retry(err)
	}
	return reconciler.Continue()
}

// deregister removes this WebApp's key from its shard (and from the legacy
// registry while that exists); a missing registry or key is done.
//
// It always sends the patch instead of first looking for the key in the
// cached registry: the cache may not yet hold the entry an earlier pass
// wrote moments ago (a WebApp deleted right after it was registered), and
// an entry skipped here stays forever, routing to a WebApp that is gone,
// with no WebApp left to remove it. Removing an absent key changes nothing.
func (r registry) deregister(ctx context.Context, s *scope) reconciler.Outcome {
	patch, err := json.Marshal(map[string]any{"data": map[string]*string{registryKey(s.Object): nil}})
	if err != nil {
		return reconciler.Retry(err)
	}
	shard := RegistryShard(s.Object.Namespace, s.Object.Name)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: r.namespace, Name: shard}}
	err = s.Client.Patch(ctx, cm, client.RawPatch(types.MergePatchType, patch))
	if err != nil && !apierrors.IsNotFound(err) {
		return reconciler.Retry(wrapRegistry(shard, err))
	}
	if err := r.migrate(ctx, s.Client, registryKey(s.Object), false); err != nil {
		return reconciler.Retry(err)
	}
	return reconciler.Continue()
}

// migrate removes key from the legacy registry and deletes the legacy
// registry once it is empty. Nothing is sent when the cache holds no
// legacy registry (this version never creates it, so it can only have
// gone). With lookup, the key is removed only when the cached legacy
// registry has it (register: the key was written by the previous version,
// long before this pass); without, the patch is sent whenever the legacy
// registry exists (deregister: never trust a cached lookup before a
// cleanup).
func (r registry) migrate(ctx context.Context, c client.Client, key string, lookup bool) error {
	cached := &corev1.ConfigMap{}
	err := c.Get(ctx, types.NamespacedName{Namespace: r.namespace, Name: LegacyRegistryName}, cached)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return wrapRegistry(LegacyRegistryName, err)
	}
	legacy := cached
	if _, present := cached.Data[key]; present || !lookup {
		patch, err := json.Marshal(map[string]any{"data": map[string]*string{key: nil}})
		if err != nil {
			return err
		}
		legacy = registryObject(r.namespace, LegacyRegistryName)
		err = c.Patch(ctx, legacy, client.RawPatch(types.MergePatchType, patch))
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return wrapRegistry(LegacyRegistryName, err)
		}
	}
	if len(legacy.Data) > 0 || len(legacy.BinaryData) > 0 {
		return nil
	}
	// Empty: delete it, unless it changed since (a precondition on the
	// version just read or written), so no entry written meanwhile is lost.
	uid, version := legacy.UID, legacy.ResourceVersion
	err = c.Delete(ctx, registryObject(r.namespace, LegacyRegistryName), client.Preconditions{UID: &uid, ResourceVersion: &version})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return wrapRegistry(LegacyRegistryName, err)
	}
	return nil
}

// set makes key=value in the shard named shard, creating the shard when it
// is missing.
func (r registry) set(ctx context.Context, c client.Client, shard, key, value string) error {
	cm := &corev1.ConfigMap{}
	err := c.Get(ctx, types.NamespacedName{Namespace: r.namespace, Name: shard}, cm)
	// cm shares its data with the cache (CacheOptions: no deep copy of a
	// shard on every pass): read it, never write into it.
	switch {
	case apierrors.IsNotFound(err):
		cm = &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: r.namespace, Name: shard, Labels: shardLabels()},
			Data:       map[string]string{key: value},
		}
		err := c.Create(ctx, cm)
		if err == nil || !apierrors.IsAlreadyExists(err) {
			return wrapRegistry(shard, err)
		}
		// Created concurrently by another WebApp's pass, or not in the
		// cache because someone removed its labels: cm is still the
		// object we built (holding our key), so comparing against it would
		// find nothing to write. Patch the key (and the labels, which keep
		// the shard in the cache) in unconditionally; the merge patch
		// touches only them.
		patch, err := json.Marshal(map[string]any{
			"metadata": map[string]any{"labels": shardLabels()},
			"data":     map[string]string{key: value},
		})
		if err != nil {
			return err
		}
		return wrapRegistry(shard, c.Patch(ctx, registryObject(r.namespace, shard), client.RawPatch(types.MergePatchType, patch)))
	case err != nil:
		return wrapRegistry(shard, err)
	}
	if current, present := cm.Data[key]; present && current == value {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"data": map[string]string{key: value}})
	if err != nil {
		return err
	}
	return wrapRegistry(shard, c.Patch(ctx, registryObject(r.namespace, shard), client.RawPatch(types.MergePatchType, patch)))
}

// registryObject is an empty registry ConfigMap to patch or delete: never
// the object a cached read returned, which may share its maps with the
// cache.
func registryObject(namespace, name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
}

func shardLabels() map[string]string {
	return map[string]string{labelManaged: managedBy, RegistryLabel: "shard"}
}

func wrapRegistry(name string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("updating route registry ConfigMap %s: %w", name, err)
}

// registryDrift re-enqueues the WebApps whose entry in a shard was changed
// or removed behind the operator's back. The registry is shared with
// whoever else reads or edits it, and no WebApp event would ever say so.
//
// It judges only what an event changed, in that one shard: a value that
// is not the WebApp's address (a value is a function of its key), a key
// that was removed, or every key of a shard that was deleted. Its own
// writes (adding a correct key, removing the key of a deleting WebApp)
// enqueue nothing. The cost of an event is one pass over one shard's keys,
// not a list of every WebApp. A removed key counts only for a WebApp whose
// pass has reached the register step (DatabaseReady is True): the others
// register themselves.
func registryDrift(c client.Reader, registryNamespace string) handler.EventHandler {
	enqueue := func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request], key string, removed bool) {
		nn, ok := parseKey(key)
		if !ok {
			return
		}
		app := &webappv2.WebApp{}
		if c.Get(ctx, nn, app) != nil || app.DeletionTimestamp != nil {
			return // gone, or its cleanup removes the entry
		}
		if removed && !conditions.IsTrue(app, webappv2.DatabaseReady) {
			return
		}
		q.Add(reconcile.Request{NamespacedName: nn})
	}
	shardOf := func(o client.Object) (*corev1.ConfigMap, bool) {
		cm, ok := o.(*corev1.ConfigMap)
		return cm, ok && cm.Namespace == registryNamespace && isShard(cm.Name)
	}
	// changed enqueues the WebApps whose entry in shard is wrong in now
	// and was not so in before.
	changed := func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request], shard string, before, now map[string]string) {
		for key, value := range now {
			if old, ok := before[key]; ok && old == value {
				continue
			}
			if nn, ok := parseKey(key); ok && RegistryShard(nn.Namespace, nn.Name) == shard && value != RegistryValue(nn.Namespace, nn.Name) {
				enqueue(ctx, q, key, false)
			}
		}
		for key := range before {
			if _, ok := now[key]; ok {
				continue
			}
			if nn, ok := parseKey(key); ok && RegistryShard(nn.Namespace, nn.Name) == shard {
				enqueue(ctx, q, key, true)
			}
		}
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if cm, ok := shardOf(e.Object); ok {
				changed(ctx, q, cm.Name, nil, cm.Data)
			}
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			cm, ok := shardOf(e.ObjectNew)
			old, okOld := e.ObjectOld.(*corev1.ConfigMap)
			if ok && okOld {
				changed(ctx, q, cm.Name, old.Data, cm.Data)
			}
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if cm, ok := shardOf(e.Object); ok {
				changed(ctx, q, cm.Name, cm.Data, nil)
			}
		},
	}
}
