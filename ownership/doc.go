// Package ownership creates, repairs and prunes the objects a controller owns
// (the Deployment, Service and ConfigMap behind a custom resource) without
// writing when nothing changed.
//
// # The problem
//
// The usual pattern - controllerutil.CreateOrUpdate with a mutate function -
// compares the live object with a copy the mutate function changed. The
// mutate function sets the fields the controller cares about, and every
// field the apiserver defaulted (a Deployment's strategy and
// revisionHistoryLimit, a container's terminationMessagePath and
// imagePullPolicy, a Service's clusterIP, sessionAffinity and port
// protocol/targetPort) is either wiped by building the spec from scratch, or
// kept only by hand-written field-by-field copying. Get it wrong and every
// reconcile issues an Update: constant apiserver load, an audit-log and watch
// event for each pass, and conflicts with other writers. Worse, an Update
// replaces whole lists and maps, so it also wipes what other actors added (an
// HPA's replicas, another controller's annotations, an injected sidecar).
// Objects the controller stopped wanting are left behind unless someone
// remembers to delete them.
//
// # What this package does
//
// Applier.Apply takes the desired object as an apply configuration (client-go's
// k8s.io/client-go/applyconfigurations for built-in kinds, controller-gen's
// applyconfiguration output for custom resources), so only the fields the
// caller set are ever sent: a typed object would also send the zero values
// of fields it cannot mark unset, and force-own them. Apply sets a
// controller reference from the owner, compares the desired object with the
// live one client-side, and writes only on drift, with server-side apply
// under one field manager. Server-side apply gives per-field ownership:
// defaults and other managers' fields are left alone, fields we stopped
// sending are removed, and a hand edit of one of our fields is reverted by
// the next Apply. The client-side check makes a converged pass free of
// writes (an identical server-side apply is still a request that the
// apiserver must process):
//   - every field in desired must be present and equal in the live object,
//     compared by the kind's schema the way server-side apply merges it
//     (list elements by their keys, sets as sets, quantities by value; see
//     firstDrift in compare.go), and
//   - a hash of the desired configuration, recorded in ConfigHashAnnotation,
//     must match, which catches fields we no longer want.
//
// Applier.Prune deletes objects the owner controls that are no longer
// desired, with Background propagation and a UID precondition.
//
// Apply refuses to act on objects another owner controls
// (ForeignControllerError) and Prune skips them; Apply adopts an existing
// object without a controller only if this operator wrote it before, or
// with Adopt (AdoptionRefusedError); both keep owner references within one
// namespace, as the garbage collector requires.
//
// # Typical use
//
//	a := &ownership.Applier{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(),
//		Scheme: mgr.GetScheme(), FieldManager: "webapp-operator"}
//	// In Reconcile, build the desired objects from scratch from the owner's spec:
//	dep := appsv1ac.Deployment(app.Name, app.Namespace).WithSpec(...)
//	if _, err := a.Apply(ctx, app, dep, ownership.IgnoreFields("spec.replicas")); err != nil { ... }
//	if _, err := a.Prune(ctx, app, &corev1.ConfigMapList{}, wantedConfigMapNames...); err != nil { ... }
//
// Watch the owned types with Owns(&appsv1.Deployment{}) so that a hand edit
// or deletion triggers a reconcile that repairs it. To apply owned custom
// resources, set Applier.Schemas (a reconciler.Reconciler does).
package ownership
