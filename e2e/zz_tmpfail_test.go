//go:build e2e

package e2e

import (
	"context"
	"testing"

	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"
)

func TestTmpFail(t *testing.T) {
	f := features.New("deliberate failure").Assess("fails", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
		harness.MustKubectl(ctx, t, "create", "configmap", "evidence", "-n", Namespace(ctx, t), "--from-literal=a=b")
		t.Fatal("deliberate")
		return ctx
	}).Feature()
	testenv.Test(t, f)
}
