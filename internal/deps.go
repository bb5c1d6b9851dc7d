package deps
import (
	_ "sigs.k8s.io/controller-runtime"
	_ "sigs.k8s.io/controller-runtime/pkg/envtest"
	_ "k8s.io/client-go/kubernetes"
	_ "github.com/go-logr/logr"
	_ "github.com/stretchr/testify/require"
	_ "sigs.k8s.io/e2e-framework/pkg/env"
)
