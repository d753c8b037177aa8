// node.go: the CSI Node service: publish (a daemon for the volume, bound
// read-only onto the target) and unpublish; no staging, no stats.
package driver

import (
	"context"
	"errors"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// published: what a target holds.
type published struct {
	volumeID string
	key      string
}

// readOnlyModes are served whatever the request's readonly flag says.
var readOnlyModes = map[csi.VolumeCapability_AccessMode_Mode]bool{
	csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY: true,
	csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY:  true,
}

// checkCapability: a mount (not a block device), and read-only access:
// a reader mode, or a writer mode with readonly set (an inline volume's
// readOnly: true, which kubelet sends as SINGLE_NODE_WRITER).
func checkCapability(c *csi.VolumeCapability, readonly bool) error {
	if c == nil {
		return status.Error(codes.InvalidArgument, "volume_capability is missing")
	}
	if c.GetBlock() != nil {
		return status.Error(codes.InvalidArgument, "stfs volumes are filesystems, not block devices")
	}
	if c.GetMount() == nil {
		return status.Error(codes.InvalidArgument, "volume_capability: access_type mount is missing")
	}
	m := c.GetAccessMode().GetMode()
	if m == csi.VolumeCapability_AccessMode_UNKNOWN {
		return status.Error(codes.InvalidArgument, "volume_capability: access_mode is missing")
	}
	if !readOnlyModes[m] && !readonly {
		return status.Errorf(codes.InvalidArgument, "access mode %s: stfs volumes are read-only (use ReadOnlyMany, or readOnly: true)", m)
	}
	return nil
}

// NodePublishVolume binds the volume's daemon (started if need be) onto
// the target, read-only.
func (drv *Driver) NodePublishVolume(ctx context.Context, req *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume_id is missing")
	}
	target := req.GetTargetPath()
	if target == "" {
		return nil, status.Error(codes.InvalidArgument, "target_path is missing")
	}
	if !filepath.IsAbs(target) {
		return nil, status.Error(codes.InvalidArgument, "target_path is not absolute")
	}
	target = filepath.Clean(target)
	if err := checkCapability(req.GetVolumeCapability(), req.GetReadonly()); err != nil {
		return nil, err
	}
	v, err := ParseVolume(req.GetVolumeContext(), req.GetSecrets())
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if err := CheckLocal(v.Source, drv.cfg.LocalDir, drv.cfg.CacheDir, drv.cfg.StateDir, filepath.Dir(drv.cfg.Launcher)); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if err := drv.cfg.Limits.Check(v); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if err := drv.cfg.Policy.Check(ctx, v.Source); err != nil {
		return nil, err
	}
	key := drv.key(v)
	// kubelet runs one operation at a time per volume and target; a
	// slow start of one source holds only its own daemon's lock, never
	// another pod's publish
	drv.mu.Lock()
	p, ok := drv.targets[target]
	drv.mu.Unlock()
	if ok && v.AllowOfflineCache && p.key == drv.key(v.offline()) {
		// published already, from the node cache: the same answer
		v, key = v.offline(), p.key
	}
	if ok && (p.key != key || (p.volumeID != "" && p.volumeID != req.GetVolumeId())) {
		return nil, status.Errorf(codes.AlreadyExists, "%s is published already, with another volume", target)
	}
	err = drv.publish(ctx, v, target)
	var refused *stfsRefused
	if err != nil && !v.Offline && errors.As(err, &refused) && refused.credentialsRefused() {
		// the origin refuses these credentials now: no offline
		// service for them either
		forgetAccepted(drv.cfg.StateDir, key)
	}
	if err != nil && !v.Offline && v.AllowOfflineCache && refused != nil && refused.unreachable() {
		if !wasAccepted(drv.cfg.StateDir, key, time.Now()) {
			return nil, status.Errorf(codes.FailedPrecondition,
				"%s: the origin cannot be reached (%s) and these credentials were never accepted for this source on this node: not served from the node cache (allowOfflineCache)",
				v.Source, refused.msg)
		}
		log.Printf("stfs-csi: %s: the origin of %s cannot be reached: served offline from the node cache (allowOfflineCache)", key, v.Source)
		v = v.offline()
		key = drv.key(v)
		err = drv.publish(ctx, v, target)
		var off *stfsRefused
		if errors.As(err, &off) { // both reasons
			err = &stfsRefused{v.Source, refused.msg + "; and offline, from the node cache: " + off.msg, off.status}
		}
	}
	if err != nil {
		return nil, err
	}
	drv.mu.Lock()
	drv.targets[target] = published{req.GetVolumeId(), key}
	drv.mu.Unlock()
	return &csi.NodePublishVolumeResponse{}, nil
}

// publish binds the daemon of v (started if need be) onto target.
func (drv *Driver) publish(ctx context.Context, v *Volume, target string) error {
	// kubelet runs one operation at a time per volume and target; a
	// slow start of one source holds only its own daemon's lock, never
	// another pod's publish
	d, err := drv.get(v)
	if err != nil {
		return err
	}
	d.mu.Lock()
	for d.removed { // stopped meanwhile: its successor
		d.mu.Unlock()
		if d, err = drv.get(v); err != nil {
			return err
		}
		d.mu.Lock()
	}
	defer d.mu.Unlock()
	return drv.publishLocked(ctx, d, target, v)
}

// stfsRefused: stfs did not serve source; msg is its own words, status
// its exit status (its class: class.go).  The gRPC answer is Internal
// with the words.
type stfsRefused struct {
	source, msg string
	status      int
}

func (e *stfsRefused) Error() string {
	return "stfs could not serve " + e.source + ": " + e.msg
}

func (e *stfsRefused) GRPCStatus() *status.Status {
	return status.New(codes.Internal, e.Error())
}

func (drv *Driver) publishLocked(ctx context.Context, d *daemon, target string, v *Volume) error {
	if d.needsSecrets { // adopted: this publish has the same credentials
		d.vol, d.needsSecrets = v, false
	}
	if d.grace != nil {
		d.grace.Stop()
		d.grace = nil
	}
	for !d.live {
		if d.starting == nil {
			if err := drv.start(d); err != nil {
				if len(d.targets) == 0 {
					drv.stopLocked(d)
				}
				return status.Errorf(codes.Internal, "%s: %v", d.vol.Source, err)
			}
		}
		// the source opens without the lock held; a deadline leaves it
		// opening for the next try
		done := d.starting
		d.waiters++
		d.mu.Unlock()
		select {
		case <-done:
		case <-ctx.Done():
		}
		d.mu.Lock()
		d.waiters--
		select {
		case <-done:
		default:
			return status.Errorf(codes.DeadlineExceeded, "%s is still opening: try again", d.vol.Source)
		}
		if d.removed || (!d.live && d.starting == nil) {
			var es *errStarting
			err := d.startErr
			if err == nil {
				err = errGone
			}
			if errors.As(err, &es) {
				return &stfsRefused{d.vol.Source, es.msg, es.status}
			}
			return status.Errorf(codes.Internal, "%s: %v", d.vol.Source, err)
		}
	}
	if d.grace != nil { // armed when the start ended with no target
		d.grace.Stop()
		d.grace = nil
	}
	if d.targets[target] {
		if ok, _ := drv.sys.isMountPoint(target); ok {
			return nil // published already: the same answer
		}
	}
	if err := os.MkdirAll(target, 0o750); err != nil {
		return status.Errorf(codes.Internal, "target %s: %v", target, err)
	}
	if err := drv.sys.unmountAll(target); err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	if err := drv.sys.bindReadOnly(d.dir, target); err != nil {
		if len(d.targets) == 0 {
			drv.releaseLocked(d, target)
		}
		return status.Error(codes.Internal, err.Error())
	}
	d.targets[target] = true
	log.Printf("stfs-csi: %s: published on %s (%d targets)", d.key, target, len(d.targets))
	return nil
}

// NodeUnpublishVolume unbinds the target and removes it; the daemon's last
// target arms its grace timer.
func (drv *Driver) NodeUnpublishVolume(ctx context.Context, req *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume_id is missing")
	}
	if req.GetTargetPath() == "" {
		return nil, status.Error(codes.InvalidArgument, "target_path is missing")
	}
	target := filepath.Clean(req.GetTargetPath())
	drv.mu.Lock()
	p, ok := drv.targets[target]
	var d *daemon
	if ok {
		d = drv.daemons[p.key]
	}
	drv.mu.Unlock()
	if d != nil {
		d.mu.Lock()
	}
	err := drv.sys.unmountAll(target)
	if err == nil {
		err = os.Remove(target)
		if errors.Is(err, os.ErrNotExist) {
			err = nil
		}
	}
	if d != nil {
		if err == nil {
			drv.releaseLocked(d, target)
		}
		d.mu.Unlock()
	}
	if err != nil {
		return nil, status.Errorf(codes.Internal, "%s: %v", target, err)
	}
	drv.mu.Lock()
	delete(drv.targets, target)
	drv.mu.Unlock()
	if ok {
		log.Printf("stfs-csi: %s: unpublished %s", p.key, target)
	}
	return &csi.NodeUnpublishVolumeResponse{}, nil
}

// NodeGetCapabilities: none (no staging, no stats, no expansion).
func (drv *Driver) NodeGetCapabilities(ctx context.Context, req *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	return &csi.NodeGetCapabilitiesResponse{}, nil
}

// NodeGetInfo: the node's name, as given by --node-id.
func (drv *Driver) NodeGetInfo(ctx context.Context, req *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	return &csi.NodeGetInfoResponse{NodeId: drv.cfg.NodeID}, nil
}
