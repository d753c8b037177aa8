// metrics.go: the driver's side of its /metrics (--metrics-address,
// csi/internal/metrics): each publish counted by result and refusal
// reason, the daemons listed for the merge of their files, the option
// that makes a daemon write its file, and the files of daemons gone.
package driver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"stfs/csi/internal/metrics"
)

// EnableMetrics makes the driver count into a registry whose daemons'
// files are under dir (made the daemons' user's, 0700): their daemons
// are started with -o metrics=DIR/KEY.prom from now on.  dir's parent
// may be the daemons' user's (the launcher's folder): dir is changed
// through a descriptor that did not follow a symbolic link, and read
// through it.
func (drv *Driver) EnableMetrics(dir string) (*metrics.Set, error) {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, err
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	if err := unix.Fchown(fd, drv.cfg.DaemonUID, drv.cfg.DaemonGID); err != nil {
		unix.Close(fd)
		return nil, err
	}
	if err := unix.Fchmod(fd, 0o700); err != nil {
		unix.Close(fd)
		return nil, err
	}
	drv.metrics = metrics.New(dir, fd, drv.cfg.MaxDaemons, drv.metricsDaemons)
	return drv.metrics, nil
}

// PruneMetrics removes the files of daemons the driver does not hold (a
// previous run's, stopped meanwhile).
func (drv *Driver) PruneMetrics() {
	if drv.metrics == nil {
		return
	}
	drv.mu.Lock()
	defer drv.mu.Unlock()
	drv.metrics.Prune(func(key string) bool { return drv.daemons[key] != nil })
}

// metricsDaemons lists the daemons for a scrape.
func (drv *Driver) metricsDaemons() []metrics.Daemon {
	drv.mu.Lock()
	ds := make([]*daemon, 0, len(drv.daemons))
	for _, d := range drv.daemons {
		ds = append(ds, d)
	}
	drv.mu.Unlock()
	out := make([]metrics.Daemon, 0, len(ds))
	for _, d := range ds {
		d.mu.Lock()
		if !d.removed {
			out = append(out, metrics.Daemon{Key: d.key, Source: d.vol.Source, Live: d.live})
		}
		d.mu.Unlock()
	}
	return out
}

// metricsOptions: the stfs options that make the daemon key write its
// metrics (none without --metrics-address); its previous file goes.
func (drv *Driver) metricsOptions(key string) []string {
	if drv.metrics == nil {
		return nil
	}
	drv.metrics.Remove(key)
	return []string{"metrics=" + drv.metrics.Path(key)}
}

// forgetMetrics removes the file of the daemon key, stopped.
func (drv *Driver) forgetMetrics(key string) {
	if drv.metrics != nil {
		drv.metrics.Remove(key)
	}
}

// observe counts each NodePublishVolume: its result, a refusal's reason
// (from its code: a fixed set) and its time.
func (drv *Driver) observe(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if drv.metrics == nil || !strings.HasSuffix(info.FullMethod, "/NodePublishVolume") {
		return h(ctx, req)
	}
	t := time.Now()
	resp, err := h(ctx, req)
	result, reason := publishResult(err)
	drv.metrics.Publish(result, reason, time.Since(t))
	return resp, err
}

// publishResult: a publish's result and, when refused, why.
func publishResult(err error) (string, string) {
	if err == nil {
		return metrics.ResultOK, ""
	}
	var refused *stfsRefused
	if errors.As(err, &refused) {
		return metrics.ResultRefused, "source_refused"
	}
	switch status.Code(err) {
	case codes.InvalidArgument:
		return metrics.ResultRefused, "invalid_request"
	case codes.PermissionDenied:
		return metrics.ResultRefused, "host_not_allowed"
	case codes.AlreadyExists:
		return metrics.ResultRefused, "target_in_use"
	case codes.ResourceExhausted:
		return metrics.ResultRefused, "max_daemons"
	case codes.FailedPrecondition:
		return metrics.ResultRefused, "offline_refused"
	case codes.DeadlineExceeded, codes.Canceled:
		return metrics.ResultTimeout, ""
	}
	return metrics.ResultError, ""
}

// countRecovery counts a daemon mounted again after it died.
func (drv *Driver) countRecovery() {
	if drv.metrics != nil {
		drv.metrics.Recovery()
	}
}
