package driver

import (
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestPublishResult: each refusal the Node service answers has its reason;
// a timeout and an internal error are not refusals.
func TestPublishResult(t *testing.T) {
	for _, c := range []struct {
		err            error
		result, reason string
	}{
		{nil, "ok", ""},
		{status.Error(codes.InvalidArgument, "x"), "refused", "invalid_request"},
		{status.Error(codes.PermissionDenied, "x"), "refused", "host_not_allowed"},
		{status.Error(codes.AlreadyExists, "x"), "refused", "target_in_use"},
		{status.Error(codes.ResourceExhausted, "x"), "refused", "max_daemons"},
		{status.Error(codes.FailedPrecondition, "x"), "refused", "offline_refused"},
		{&stfsRefused{"/m", "no such file", exitNotFound}, "refused", "source_refused"},
		{fmt.Errorf("wrapped: %w", &stfsRefused{"/m", "x", exitFailed}), "refused", "source_refused"},
		{status.Error(codes.DeadlineExceeded, "x"), "timeout", ""},
		{status.Error(codes.Internal, "x"), "error", ""},
		{errors.New("plain"), "error", ""},
	} {
		r, why := publishResult(c.err)
		if r != c.result || why != c.reason {
			t.Errorf("%v: %s %s, want %s %s", c.err, r, why, c.result, c.reason)
		}
	}
}
