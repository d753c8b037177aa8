// health_test.go: /healthz against a CSI Identity server on a real unix
// socket: ok when Probe says ready; 500 with the reason when Probe fails,
// says not ready, hangs past the timeout, the socket is gone, or another
// check fails.
package health

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

type identity struct {
	csi.UnimplementedIdentityServer
	mu    sync.Mutex
	err   error
	ready bool
	hang  chan struct{}
	calls int
}

func (s *identity) Probe(ctx context.Context, _ *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	s.mu.Lock()
	s.calls++
	err, ready, hang := s.err, s.ready, s.hang
	s.mu.Unlock()
	if hang != nil {
		select {
		case <-hang:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if err != nil {
		return nil, err
	}
	return &csi.ProbeResponse{Ready: wrapperspb.Bool(ready)}, nil
}

func (s *identity) set(f func(*identity)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s)
}

func serve(t *testing.T, path string, id *identity) *grpc.Server {
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	csi.RegisterIdentityServer(s, id)
	go s.Serve(l)
	t.Cleanup(s.Stop)
	return s
}

func get(t *testing.T, c *Checker) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	c.ServeHTTP(rec, httptest.NewRequest("GET", "/healthz", nil))
	return rec.Code, rec.Body.String()
}

func TestHealthz(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "csi.sock")
	id := &identity{ready: true}
	srv := serve(t, sock, id)
	var other error
	var omu sync.Mutex
	c := &Checker{Socket: sock, Timeout: 2 * time.Second, Checks: []func() error{
		func() error { omu.Lock(); defer omu.Unlock(); return other }}}
	if code, body := get(t, c); code != 200 || body != "ok\n" {
		t.Fatalf("ready: %d %q", code, body)
	}
	id.set(func(s *identity) { s.ready = false })
	if code, body := get(t, c); code != 500 || !strings.Contains(body, "not ready") {
		t.Fatalf("not ready: %d %q", code, body)
	}
	id.set(func(s *identity) {
		s.ready = true
		s.err = status.Error(codes.FailedPrecondition, "the launcher (/run/x.sock): connection refused")
	})
	if code, body := get(t, c); code != 500 || !strings.Contains(body, "the launcher") {
		t.Fatalf("Probe failing: %d %q", code, body)
	}
	id.set(func(s *identity) { s.err = nil })
	omu.Lock()
	other = errors.New("kubelet refused the registration: bad version")
	omu.Unlock()
	if code, body := get(t, c); code != 500 || !strings.Contains(body, "bad version") {
		t.Fatalf("other check failing: %d %q", code, body)
	}
	omu.Lock()
	other = nil
	omu.Unlock()
	// Probe hanging: 500 at the timeout, not a hung probe
	hang := make(chan struct{})
	id.set(func(s *identity) { s.hang = hang })
	t0 := time.Now()
	code, body := get(t, c)
	close(hang)
	if code != 500 || time.Since(t0) > 8*time.Second || !strings.Contains(body, "DeadlineExceeded") {
		t.Fatalf("Probe hanging: %d %q after %v", code, body, time.Since(t0))
	}
	id.set(func(s *identity) { s.hang = nil })
	if code, _ := get(t, c); code != 200 {
		t.Fatalf("ready again: %d", code)
	}
	// the server gone, its socket with it: 500 at the timeout
	srv.Stop()
	c.Timeout = 300 * time.Millisecond
	if code, body := get(t, c); code != 500 || !strings.Contains(body, sock) {
		t.Fatalf("no server: %d %q", code, body)
	}
	// each request dialled afresh: one Probe per request reached the server
	id.set(func(s *identity) {
		if s.calls != 6 {
			t.Errorf("%d Probes for 6 requests that reached the server", s.calls)
		}
	})
}

func TestServe(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "csi.sock")
	serve(t, sock, &identity{ready: true})
	l, err := Serve("127.0.0.1:0", &Checker{Socket: sock, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	r, err := http.Get("http://" + l.Addr().String() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(r.Body)
	r.Body.Close()
	if r.StatusCode != 200 || string(b) != "ok\n" {
		t.Fatalf("%d %q", r.StatusCode, b)
	}
	r, err = http.Get("http://" + l.Addr().String() + "/other")
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != 404 {
		t.Fatalf("/other: %d", r.StatusCode)
	}
}
