// Package ownership creates, repairs and prunes the objects a controller owns
// (the Deployment, Service and ConfigMap behind a custom resource) without
// writing when nothing changed.
//
// Applier.Apply takes the desired object as an apply configuration, so only
// the fields the caller set are sent, compares it client-side with the live
// object by the kind's schema, and writes only on drift, with server-side
// apply under one field manager: defaults and other managers' fields are
// left alone, fields we stopped sending are released, and a converged pass
// makes no write. Applier.Prune deletes the objects the owner controls that
// are no longer desired. Objects another owner controls are never touched,
// and an object without a controller is adopted only if something on it
// ties it to this owner's UID (this operator having written it, for
// another owner or for none, is not enough), or with Adopt.
// docs/ownership.md has the problem this solves, the guarantees and the
// caveats.
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
//
// # Reading the code
//
// The apply path reads top to bottom, a file per step, in the order the
// data flows: applier.go (Applier, Apply), desired.go (the apply
// configuration becomes the configuration to compare and send), compare.go
// (does the live object differ?), write.go (read the live object, decide
// whether it may be taken, send), then prune.go; schema.go finds the
// schemas the comparison follows, errors.go has the refusals.
package ownership
