package testenv

import (
	"context"
	"testing"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// Manager is a started controller-runtime manager for one test: the client
// users' operators really get, whose reads come from an informer cache that
// trails the apiserver.
type Manager struct {
	manager.Manager
	// Client reads through the informer cache and writes to the apiserver.
	Client client.Client
	// APIReader reads straight from the apiserver: use it only where a test
	// needs the apiserver's truth.
	APIReader client.Reader
	// Cache is the manager's informer cache.
	Cache cache.Cache
}

// StartManager starts a manager on e (metrics off, no leader election) and
// stops it when t ends. setup, if given, runs before the manager starts, to
// register controllers, indexes or webhooks; the manager's cache has synced
// when StartManager returns.
func (e *Env) StartManager(t testing.TB, setup ...func(manager.Manager) error) *Manager {
	t.Helper()
	mgr, err := ctrl.NewManager(e.Config, ctrl.Options{
		Scheme:  e.Scheme,
		Metrics: metricsserver.Options{BindAddress: "0"},
		// Tests build controllers with the same name in many managers.
		Controller: config.Controller{SkipNameValidation: new(true)},
	})
	if err != nil {
		t.Fatalf("creating manager: %v", err)
	}
	for _, s := range setup {
		if err := s(mgr); err != nil {
			t.Fatalf("setting up manager: %v", err)
		}
	}
	RunManager(t, mgr)
	return &Manager{Manager: mgr, Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Cache: mgr.GetCache()}
}

// RunManager starts mgr, which a test built itself (its own rest.Config or
// cache options), waits until its cache has synced, and stops it when t
// ends, failing t if it stops with an error. It returns the context mgr
// runs under.
func RunManager(t testing.TB, mgr manager.Manager) context.Context {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("manager stopped with an error: %v", err)
			}
		case <-time.After(time.Minute):
			t.Errorf("manager did not stop within a minute")
		}
	})
	syncCtx, syncCancel := context.WithTimeout(ctx, time.Minute)
	defer syncCancel()
	if !mgr.GetCache().WaitForCacheSync(syncCtx) {
		t.Fatalf("manager cache did not sync")
	}
	return ctx
}
