// identity.go: the CSI Identity service.
package driver

import (
	"context"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// Name is the driver's name: the CSIDriver object's and every volume's
// "driver:".
const Name = "csi.stfs.io"

// GetPluginInfo: the name and the version.
func (drv *Driver) GetPluginInfo(ctx context.Context, req *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: Name, VendorVersion: drv.cfg.Version}, nil
}

// GetPluginCapabilities: none; in particular no controller service.
func (drv *Driver) GetPluginCapabilities(ctx context.Context, req *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	return &csi.GetPluginCapabilitiesResponse{}, nil
}

// Probe: ready when the launcher answers on its socket.
func (drv *Driver) Probe(ctx context.Context, req *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	if err := drv.sys.probe(drv.cfg.Launcher); err != nil {
		return nil, status.Errorf(codes.FailedPrecondition, "the launcher (%s): %v", drv.cfg.Launcher, err)
	}
	return &csi.ProbeResponse{Ready: wrapperspb.Bool(true)}, nil
}
