package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// follower keeps the objects of one kind in one namespace current by a
// list and then a watch, for the bench's waits: polling them costs the API
// server nothing, where a list of N every interval cost it a quarter of a
// core at N = 10,000 (2.5 s of CPU per list of the WebApps, one every 10
// s), load the operator under test would wait behind. Its requests are the
// bench's own (counted by the harness's client, so left out of the
// operator's figures) and end before the phase that made them: Close.
type follower struct {
	c    client.WithWatch
	ns   string
	list client.ObjectList // an empty list of the kind

	mu   sync.Mutex
	objs map[string]client.Object

	stop context.CancelFunc
	done chan struct{}
}

// follow lists the objects of list's kind in ns and follows them until
// Close.
func (h *harness) follow(ctx context.Context, ns string, list client.ObjectList) (*follower, error) {
	ctx, cancel := context.WithCancel(ctx)
	f := &follower{c: h.c, ns: ns, list: list, stop: cancel, done: make(chan struct{})}
	rv, err := f.relist(ctx)
	if err != nil {
		cancel()
		return nil, err
	}
	go f.run(ctx, rv)
	return f, nil
}

// Items returns the objects as last seen. They are shared: read only.
func (f *follower) Items() []client.Object {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]client.Object, 0, len(f.objs))
	for _, o := range f.objs {
		out = append(out, o)
	}
	return out
}

// Close stops the watch and returns once its request has ended.
func (f *follower) Close() {
	f.stop()
	<-f.done
}

func (f *follower) relist(ctx context.Context) (string, error) {
	l := f.list.DeepCopyObject().(client.ObjectList)
	if err := f.c.List(ctx, l, client.InNamespace(f.ns)); err != nil {
		return "", fmt.Errorf("listing %T in %s: %w", f.list, f.ns, err)
	}
	objs := map[string]client.Object{}
	if err := meta.EachListItem(l, func(o runtime.Object) error {
		co := o.(client.Object)
		objs[co.GetName()] = co
		return nil
	}); err != nil {
		return "", err
	}
	f.mu.Lock()
	f.objs = objs
	f.mu.Unlock()
	return l.GetResourceVersion(), nil
}

// run watches from rv until ctx is done: again from the last version seen
// when a watch ends, after a new list when that version is gone (410), a
// second after a failure.
func (f *follower) run(ctx context.Context, rv string) {
	defer close(f.done)
	relist := false
	for ctx.Err() == nil {
		if relist {
			var err error
			if rv, err = f.relist(ctx); err != nil {
				pause(ctx, time.Second)
				continue
			}
		}
		var failed bool
		if rv, relist, failed = f.watch(ctx, rv); failed {
			pause(ctx, time.Second)
		}
	}
}

// watch applies the events of one watch from rv and returns the version
// to go on from, whether to list again first (rv is gone) and whether the
// watch failed.
func (f *follower) watch(ctx context.Context, rv string) (next string, relist, failed bool) {
	timeout := int64(time.Hour / time.Second)
	w, err := f.c.Watch(ctx, f.list.DeepCopyObject().(client.ObjectList), client.InNamespace(f.ns),
		&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true, TimeoutSeconds: &timeout}})
	if err != nil {
		return rv, gone(err), true
	}
	defer w.Stop()
	events := 0
	for {
		var ev watch.Event
		var open bool
		select {
		case <-ctx.Done(): // Close: do not wait for the watch to notice
			return rv, false, false
		case ev, open = <-w.ResultChan():
		}
		if !open {
			// A watch that ends at once, with nothing, is paused after
			// like a failure; one that ran ends at its timeout.
			return rv, false, events == 0
		}
		if ev.Type == watch.Error {
			return rv, gone(apierrors.FromObject(ev.Object)), true
		}
		events++
		o, ok := ev.Object.(client.Object)
		if !ok {
			continue
		}
		rv = o.GetResourceVersion()
		f.mu.Lock()
		switch ev.Type {
		case watch.Added, watch.Modified:
			f.objs[o.GetName()] = o
		case watch.Deleted:
			delete(f.objs, o.GetName())
		}
		f.mu.Unlock()
	}
}

// gone reports whether a watch failed because its version is too old.
func gone(err error) bool { return apierrors.IsResourceExpired(err) || apierrors.IsGone(err) }

func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
