// Package kwoknodes adds simulated nodes to a kwok cluster, for the suites
// (bench, the e2e chaos suite) that run more pods than kwokctl's one node
// holds.
package kwoknodes

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// kwokNodeAnnotation marks the nodes kwok simulates (kwokctl's default
// selector).
const kwokNodeAnnotation = "kwok.x-k8s.io/node"

// Ensure adds simulated nodes named prefix-000, prefix-001, ..., cloned
// from the cluster's kwok node, until the kwok nodes' pod capacity holds
// pods (kwokctl's one node takes 110), and waits until they are Ready. kwok
// manages every node that carries its annotation, so a clone is as real as
// `kwokctl scale node`'s. Nodes that already exist are kept and counted.
func Ensure(ctx context.Context, cfg *rest.Config, pods int, prefix string) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("kwok nodes: %w", err)
	}
	list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing nodes: %w", err)
	}
	var template *corev1.Node
	capacity := int64(0)
	for i := range list.Items {
		n := &list.Items[i]
		if _, ok := n.Annotations[kwokNodeAnnotation]; ok {
			template = n
			capacity += n.Status.Allocatable.Pods().Value()
		}
	}
	if template == nil {
		return fmt.Errorf("no node with the %s annotation: is this a kwok cluster?", kwokNodeAnnotation)
	}
	perNode := template.Status.Allocatable.Pods().Value()
	if perNode <= 0 {
		return fmt.Errorf("node %s has no pod capacity", template.Name)
	}
	var added []string
	for i := 0; capacity < int64(pods); i++ {
		name := fmt.Sprintf("%s-%03d", prefix, i)
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}, Annotations: template.Annotations},
			Spec:       corev1.NodeSpec{Taints: template.Spec.Taints},
			Status: corev1.NodeStatus{
				Capacity: template.Status.Capacity, Allocatable: template.Status.Allocatable, NodeInfo: template.Status.NodeInfo,
			},
		}
		for k, v := range template.Labels {
			node.Labels[k] = v
		}
		node.Labels[corev1.LabelHostname] = name
		if _, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			if apierrors.IsAlreadyExists(err) {
				continue // counted in the list above
			}
			return fmt.Errorf("creating node %s: %w", name, err)
		}
		added = append(added, name)
		capacity += perNode
	}
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, name := range added {
			n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			ready := false
			for _, c := range n.Status.Conditions {
				ready = ready || (c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue)
			}
			if !ready {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("simulated nodes %v not Ready: %w", added, err)
	}
	return nil
}
