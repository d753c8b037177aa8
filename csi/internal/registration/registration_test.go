// registration_test.go: kubelet's side of the registration, played with
// the API's own client over the socket: GetInfo's answer, the
// notifications kept for Status, a stale socket replaced, Stop removing it.
package registration

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

func client(t *testing.T, path string) registerapi.RegistrationClient {
	t.Helper()
	conn, err := grpc.NewClient("unix:"+path,
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return registerapi.NewRegistrationClient(conn)
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

func cfg(dir string) Config {
	return Config{Dir: dir, Name: "csi.stfs.io",
		Endpoint: "/var/lib/kubelet/plugins/csi.stfs.io/csi.sock",
		Versions: []string{"1.0.0"}}
}

func TestGetInfoAndStatus(t *testing.T) {
	dir := t.TempDir()
	// a socket file left by an earlier run (a plugin killed): replaced
	old, err := net.Listen("unix", Socket(dir, "csi.stfs.io"))
	if err != nil {
		t.Fatal(err)
	}
	old.(*net.UnixListener).SetUnlinkOnClose(false)
	old.Close()
	s, err := Start(cfg(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	if s.Path() != filepath.Join(dir, "csi.stfs.io-reg.sock") {
		t.Fatalf("socket at %s", s.Path())
	}
	c := client(t, s.Path())
	info, err := c.GetInfo(ctx(t), &registerapi.InfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if info.Type != registerapi.CSIPlugin || info.Name != "csi.stfs.io" ||
		info.Endpoint != "/var/lib/kubelet/plugins/csi.stfs.io/csi.sock" ||
		strings.Join(info.SupportedVersions, ",") != "1.0.0" {
		t.Fatalf("GetInfo: %v", info)
	}
	if s.Status() != nil || s.Registered() {
		t.Fatalf("before kubelet's word: %v %v", s.Status(), s.Registered())
	}
	if _, err := c.NotifyRegistrationStatus(ctx(t), &registerapi.RegistrationStatus{
		PluginRegistered: false, Error: "version 9.9 unsupported"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Status(); err == nil || !strings.Contains(err.Error(), "version 9.9 unsupported") || s.Registered() {
		t.Fatalf("after a refusal: %v %v", err, s.Registered())
	}
	if _, err := c.NotifyRegistrationStatus(ctx(t), &registerapi.RegistrationStatus{
		PluginRegistered: true}); err != nil {
		t.Fatal(err)
	}
	if err := s.Status(); err != nil || !s.Registered() {
		t.Fatalf("after kubelet's retry succeeded: %v %v", err, s.Registered())
	}
	// the socket removed under the plugin: kubelet deregistered it
	os.Remove(s.Path())
	if err := s.Status(); err == nil {
		t.Fatal("no error with the socket gone")
	}
}

func TestStopRemovesSocket(t *testing.T) {
	dir := t.TempDir()
	s, err := Start(cfg(dir))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.Path()); err != nil {
		t.Fatal(err)
	}
	s.Stop()
	if _, err := os.Stat(s.Path()); !os.IsNotExist(err) {
		t.Fatalf("socket left after Stop: %v", err)
	}
	c := client(t, s.Path())
	c2, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if _, err := c.GetInfo(c2, &registerapi.InfoRequest{}); err == nil {
		t.Fatal("GetInfo answered after Stop")
	}
}

func TestStartRefuses(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		c    Config
		says string
	}{
		{"relative endpoint", Config{Dir: dir, Name: "x", Endpoint: "csi.sock", Versions: []string{"1.0.0"}}, "absolute"},
		{"no folder", Config{Dir: filepath.Join(dir, "none"), Name: "x", Endpoint: "/x", Versions: []string{"1.0.0"}}, "plugins_registry"},
		{"no version", Config{Dir: dir, Name: "x", Endpoint: "/x"}, "no version"},
	} {
		if _, err := Start(tc.c); err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}
