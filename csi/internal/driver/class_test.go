package driver

// class_test.go: the driver's decisions on a daemon that did not start
// come from stfs's exit status (class.go), on the fake node: words that
// say the opposite do not move them; status 1 (an older stfs, HTTP 5xx)
// alone is read by its words.

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"stfs/csi/internal/launch"
)

const classSource = "http://127.0.0.1:9/m.safetensors"

func offlineReq(req launch.Request) bool {
	for _, o := range req.Options {
		if o == "offline" {
			return true
		}
	}
	return false
}

// classNode: a node whose policy lets classSource through, and a driver
// on it whose daemons' online starts end as answer says.
func classNode(t *testing.T) (*testNode, *Driver) {
	n := newTestNode(t, func(c *Config) {
		c.Grace = 0
		c.Policy, _ = ParsePolicy("127.0.0.1")
	})
	return n, n.driver()
}

func publishURL(drv *Driver, n *testNode, pod string) error {
	_, err := drv.NodePublishVolume(context.Background(), &csi.NodePublishVolumeRequest{
		VolumeId: "vol-" + pod, TargetPath: n.target(pod),
		VolumeCapability: &csi.VolumeCapability{
			AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
			AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY}},
		VolumeContext: map[string]string{AttrSource: classSource, AttrAllowOfflineCache: "true"},
		Secrets:       map[string]string{"HF_TOKEN": "hf_test"}})
	return err
}

// accepted: an online start that served (the origin accepted these
// credentials), then its pod gone and its daemon with it (grace 0).
func accepted(t *testing.T, n *testNode, drv *Driver) {
	if err := publishURL(drv, n, "first"); err != nil {
		t.Fatal(err)
	}
	n.unpublish(drv, "first")
	waitFor(t, "the first daemon gone", func() bool { return drv.Daemons() == 0 })
}

func markers(t *testing.T, n *testNode) int {
	ents, _ := os.ReadDir(filepath.Join(n.cfg.StateDir, "accepted"))
	return len(ents)
}

func TestClassDecides(t *testing.T) {
	for _, c := range []struct {
		name    string
		status  int
		stderr  string
		offline bool // served from the node cache
		forgets bool // the marker of accepted credentials removed
	}{
		// the class, whatever the words
		{"unreachable", exitUnreachable, "stfs: the origin went away", true, false},
		{"refused", exitRefused, "stfs: Couldn't connect to server", false, true},
		{"not found", exitNotFound, "stfs: Connection timed out", false, false},
		{"policy", exitPolicy, "stfs: Could not resolve host", false, false},
		// status 1: an older stfs, or HTTP 5xx: its words
		{"old unreachable", exitFailed, "stfs: Failed to connect to 127.0.0.1 port 9: Couldn't connect to server", true, false},
		{"5xx", exitFailed, "stfs: HTTP 503 (Service Unavailable)", true, false},
		{"old refused", exitFailed, "stfs: HTTP 401 (Unauthorized)", false, true},
		{"old other", exitFailed, "stfs: not a model", false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			n, drv := classNode(t)
			accepted(t, n, drv)
			if markers(t, n) != 1 {
				t.Fatal("no marker of accepted credentials after an online start")
			}
			n.f.mu.Lock()
			n.f.answer = func(req launch.Request) (int, string) {
				if offlineReq(req) {
					return 0, ""
				}
				return c.status, c.stderr
			}
			n.f.mu.Unlock()
			err := publishURL(drv, n, "p")
			served := n.serves("p")
			if c.offline != (err == nil && served != nil && offlineReq(served.req)) {
				t.Fatalf("exit %d %q: served offline %v (%v), want %v", c.status, c.stderr, err == nil, err, c.offline)
			}
			if !c.offline && (status.Code(err) != codes.Internal || !strings.Contains(err.Error(), c.stderr)) {
				t.Fatalf("exit %d: %v, want Internal with stfs's words", c.status, err)
			}
			if got := markers(t, n) == 0; got != c.forgets {
				t.Fatalf("exit %d: the marker removed %v, want %v", c.status, got, c.forgets)
			}
		})
	}
}

// TestClassNeverAccepted: an unreachable origin, credentials never
// accepted on this node: no offline service.
func TestClassNeverAccepted(t *testing.T) {
	n, drv := classNode(t)
	n.f.answer = func(req launch.Request) (int, string) { return exitUnreachable, "stfs: gone" }
	err := publishURL(drv, n, "p")
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("%v, want FailedPrecondition", err)
	}
	waitFor(t, "no daemon left", func() bool { return drv.Daemons() == 0 && n.f.live() == 0 })
}
