//go:build e2e

package e2e

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestKeyWriters(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 12, 3, 17, 3, 9, 0, time.UTC))
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{ManagedFields: []metav1.ManagedFieldsEntry{
		{Manager: "webapp-operator", Operation: metav1.ManagedFieldsOperationUpdate, Time: &at,
			FieldsV1: metav1.NewFieldsV1(`{"f:data":{"f:ns.app-001":{},"f:ns.app-002":{}}}`)},
		{Manager: "chaos-writer", Operation: metav1.ManagedFieldsOperationUpdate, Time: &at,
			FieldsV1: metav1.NewFieldsV1(`{"f:data":{"f:ns.app-002":{}}}`)},
	}}}
	assert.Equal(t, "webapp-operator Update at 17:03:09", keyWriters(cm, "ns.app-001"))
	assert.Equal(t, "webapp-operator Update at 17:03:09, chaos-writer Update at 17:03:09", keyWriters(cm, "ns.app-002"))
	assert.Equal(t, "no manager owns it", keyWriters(cm, "ns.app-003"))
}
