// Package registration answers kubelet's plugin registration itself (the
// pluginregistration.v1 Registration service: GetInfo,
// NotifyRegistrationStatus) on a socket in kubelet's plugins_registry
// folder, so that the node plugin needs no node-driver-registrar sidecar.
// Kubelet watches that folder: a new socket there makes it call GetInfo,
// check the versions, call NodeGetInfo on the CSI endpoint the answer
// names, write the driver into the node's CSINode, and say how it went
// with NotifyRegistrationStatus.  docs/kubernetes.md, "Registration and
// liveness".
package registration

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"os"
	"path/filepath"
	"sync"

	"google.golang.org/grpc"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// Config of the registration socket.
type Config struct {
	Dir      string   // kubelet's plugins_registry, as this process sees it
	Name     string   // the driver's name (csi.stfs.io)
	Endpoint string   // the CSI socket's path as kubelet sees it
	Versions []string // the CSI versions the plugin speaks
}

// Server answers kubelet on Dir/NAME-reg.sock until Stop.
type Server struct {
	registerapi.UnimplementedRegistrationServer
	cfg  Config
	path string
	srv  *grpc.Server
	mu   sync.Mutex
	said bool  // kubelet has notified at least once
	err  error // its last notification's error (nil: registered)
}

// Socket is where the registration socket of the driver name is made in
// dir.
func Socket(dir, name string) string {
	return filepath.Join(dir, name+"-reg.sock")
}

// Start makes the socket (one left by an earlier run is replaced: its
// creation is what tells kubelet to register again) and serves it.
func Start(cfg Config) (*Server, error) {
	if cfg.Name == "" || len(cfg.Versions) == 0 {
		return nil, errors.New("registration: no driver name or no version")
	}
	if !filepath.IsAbs(cfg.Endpoint) {
		return nil, fmt.Errorf("registration: the endpoint as kubelet sees it (%q) is not an absolute path", cfg.Endpoint)
	}
	st, err := os.Stat(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("registration: kubelet's plugins_registry: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("registration: %s is not a folder", cfg.Dir)
	}
	s := &Server{cfg: cfg, path: Socket(cfg.Dir, cfg.Name)}
	if err := os.Remove(s.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("registration: %w", err)
	}
	l, err := net.Listen("unix", s.path)
	if err != nil {
		return nil, fmt.Errorf("registration: %w", err)
	}
	s.srv = grpc.NewServer()
	registerapi.RegisterRegistrationServer(s.srv, s)
	go s.srv.Serve(l) // returns at Stop
	return s, nil
}

// Path is the registration socket's path.
func (s *Server) Path() string { return s.path }

// GetInfo: a CSI plugin, its name, where kubelet reaches it, its versions.
func (s *Server) GetInfo(ctx context.Context, req *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	log.Printf("stfs-csi: kubelet asks for the plugin's registration (%s)", s.path)
	return &registerapi.PluginInfo{
		Type:              registerapi.CSIPlugin,
		Name:              s.cfg.Name,
		Endpoint:          s.cfg.Endpoint,
		SupportedVersions: append([]string(nil), s.cfg.Versions...),
	}, nil
}

// NotifyRegistrationStatus: kubelet's word on the registration, kept for
// Status (and said by the caller's log).
func (s *Server) NotifyRegistrationStatus(ctx context.Context, st *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.said = true
	s.err = nil
	if !st.PluginRegistered {
		msg := st.Error
		if msg == "" {
			msg = "no reason given"
		}
		s.err = fmt.Errorf("kubelet refused the registration: %s", msg)
		log.Printf("stfs-csi: %v", s.err)
	} else {
		log.Printf("stfs-csi: kubelet registered %s at %s", s.cfg.Name, s.cfg.Endpoint)
	}
	return &registerapi.RegistrationStatusResponse{}, nil
}

// Status: nil while kubelet has said nothing yet or said "registered";
// else the error kubelet gave, or the socket gone from the folder (kubelet
// deregisters the driver then, and registers it again only for a new
// socket).
func (s *Server) Status() error {
	st, err := os.Lstat(s.path)
	if err != nil {
		return fmt.Errorf("the registration socket: %w", err)
	}
	if st.Mode()&os.ModeSocket == 0 {
		return fmt.Errorf("the registration socket %s is no socket", s.path)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Registered: kubelet said the registration succeeded, last time it said.
func (s *Server) Registered() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.said && s.err == nil
}

// Stop ends the service and removes the socket (kubelet deregisters the
// driver until a new plugin makes its socket).
func (s *Server) Stop() {
	s.srv.Stop()
	os.Remove(s.path)
}
