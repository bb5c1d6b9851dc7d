package reconciler

import (
	"context"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/url"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// untilAvailable retries only the API server's unavailability, and stops
// when its context ends.
func TestUntilAvailable(t *testing.T) {
	refused := &url.Error{Op: "Get", URL: "https://127.0.0.1:6443/x", Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "widgets"}, "", errors.New("no"))

	calls := 0
	got, err := untilAvailable(context.Background(), func() (int, error) {
		calls++
		if calls == 1 {
			return 0, refused
		}
		return 42, nil
	})
	assert.NoError(t, err)
	assert.Equal(t, 42, got)
	assert.Equal(t, 2, calls, "tried again after the refusal")

	badCA := &url.Error{Op: "Get", URL: "https://127.0.0.1:6443/x", Err: x509.UnknownAuthorityError{}}
	timeout := &url.Error{Op: "Get", URL: "https://127.0.0.1:6443/x", Err: context.DeadlineExceeded}
	for _, other := range []error{forbidden, badCA, timeout} {
		calls = 0
		_, err = untilAvailable(context.Background(), func() (int, error) { calls++; return 0, other })
		assert.Equal(t, other, err, "another error reaches the reflector at once, which logs it and backs off")
		assert.Equal(t, 1, calls)
	}
	for _, away := range []error{refused, io.ErrUnexpectedEOF, apierrors.NewServiceUnavailable("x"), apierrors.NewTooManyRequests("storage is (re)initializing", 1),
		apierrors.NewInternalError(errors.New("rpc error: code = Unavailable desc = etcd"))} {
		assert.True(t, serverAway(away), "%v", away)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err = untilAvailable(ctx, func() (int, error) { return 0, refused })
	assert.Equal(t, refused, err, "the last answer once the informer stops")
}
