//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
)

// healthTimeout bounds each step of verifyClusterHealth; on a healthy
// cluster each takes a second or two.
const healthTimeout = time.Minute

// verifyClusterHealth checks that the cluster does for the next feature
// what a healthy one does, after a scenario that broke its control plane:
// no pod is left half-deleted; a pod is scheduled (kube-scheduler), made Running by kwok and, deleted,
// is gone (kwok finalizes the deletion a kubelet would); and a namespace
// holding a pod is deleted to the end (kube-controller-manager's namespace
// controller, which deletes pods first and the rest only once they are
// gone). It returns what did not happen, with the last state seen.
func verifyClusterHealth(ctx context.Context, cfg *envconf.Config) error {
	cs, err := kubernetes.NewForConfig(cfg.Client().RESTConfig())
	if err != nil {
		return err
	}
	// Pods whose deletion the outage interrupted must still go: a
	// namespace holding one is never deleted.
	if err := pollState(ctx, "every pod being deleted gone", func(ctx context.Context) (bool, string, error) {
		list, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		var stuck []string
		for _, p := range list.Items {
			if p.DeletionTimestamp != nil {
				stuck = append(stuck, fmt.Sprintf("%s/%s (deleted at %s, node %s)", p.Namespace, p.Name, p.DeletionTimestamp.Format(time.TimeOnly), p.Spec.NodeName))
			}
		}
		return len(stuck) == 0, fmt.Sprintf("%d pods being deleted: %v", len(stuck), stuck), nil
	}); err != nil {
		return err
	}
	ns := envconf.RandomName("e2e-health", 20)
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
		Labels: map[string]string{namespaceLabel: "true"}}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating namespace %s: %w", ns, err)
	}
	pods := cs.CoreV1().Pods(ns)
	for _, name := range []string{"deleted", "left-to-the-namespace"} {
		// Retried: the namespace's default ServiceAccount, which
		// admission requires, is the controller manager's to create.
		if err := pollState(ctx, fmt.Sprintf("pod %s/%s created", ns, name), func(ctx context.Context) (bool, string, error) {
			_, err := pods.Create(ctx, &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "probe", Image: "registry.example.com/probe:v1"}}},
			}, metav1.CreateOptions{})
			if err != nil && !apierrors.IsAlreadyExists(err) {
				return false, "", err
			}
			return true, "created", nil
		}); err != nil {
			return err
		}
		if err := pollState(ctx, fmt.Sprintf("pod %s/%s scheduled and Running", ns, name), func(ctx context.Context) (bool, string, error) {
			p, err := pods.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, "", err
			}
			return p.Spec.NodeName != "" && p.Status.Phase == corev1.PodRunning,
				fmt.Sprintf("node %q, phase %s", p.Spec.NodeName, p.Status.Phase), nil
		}); err != nil {
			return err
		}
	}
	if err := pods.Delete(ctx, "deleted", metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("deleting pod %s/deleted: %w", ns, err)
	}
	if err := pollState(ctx, fmt.Sprintf("pod %s/deleted gone", ns), func(ctx context.Context) (bool, string, error) {
		p, err := pods.Get(ctx, "deleted", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, "gone", nil
		} else if err != nil {
			return false, "", err
		}
		return false, fmt.Sprintf("deletionTimestamp %v, phase %s, node %s", p.DeletionTimestamp, p.Status.Phase, p.Spec.NodeName), nil
	}); err != nil {
		return err
	}
	if err := cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("deleting namespace %s: %w", ns, err)
	}
	return pollState(ctx, fmt.Sprintf("namespace %s (holding a pod) deleted", ns), func(ctx context.Context) (bool, string, error) {
		n, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, "gone", nil
		} else if err != nil {
			return false, "", err
		}
		state := fmt.Sprintf("phase %s", n.Status.Phase)
		for _, c := range n.Status.Conditions {
			if c.Status == corev1.ConditionTrue {
				state += fmt.Sprintf("; %s: %s", c.Type, c.Message)
			}
		}
		return false, state, nil
	})
}

// pollState polls check every 250ms for up to healthTimeout and, if it
// does not report done, returns an error with what, the last state check
// saw and the last error it returned.
func pollState(ctx context.Context, what string, check func(context.Context) (bool, string, error)) error {
	state, last := "(no poll succeeded)", error(nil)
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, healthTimeout, true, func(ctx context.Context) (bool, error) {
		done, st, err := check(ctx)
		if ctx.Err() != nil && !done {
			return false, nil // cut off by the deadline: keep the last real answer
		}
		last = err
		if err == nil {
			state = st
		}
		return done && err == nil, nil
	})
	if err != nil {
		return fmt.Errorf("%s: not within %v: %w\n  last state: %s\n  last error: %v", what, healthTimeout, err, state, last)
	}
	return nil
}
