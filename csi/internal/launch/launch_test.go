package launch

import (
	"net"
	"os"
	"syscall"
	"testing"
)

// pair: two connected Unix stream sockets.
func pair(t testing.TB) (*net.UnixConn, *net.UnixConn) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	conn := func(fd int) *net.UnixConn {
		f := os.NewFile(uintptr(fd), "sock")
		defer f.Close()
		c, err := net.FileConn(f)
		if err != nil {
			t.Fatal(err)
		}
		return c.(*net.UnixConn)
	}
	return conn(fds[0]), conn(fds[1])
}

// TestRoundTrip: a request and its descriptor arrive as sent.
func TestRoundTrip(t *testing.T) {
	a, b := pair(t)
	defer a.Close()
	defer b.Close()
	f, err := os.Open("/dev/null")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want := Request{ID: "k", Source: "hf://o/m@x", Options: []string{"repo"}, Env: map[string]string{"HF_TOKEN": "t"}}
	if err := WriteMessage(a, want, int(f.Fd())); err != nil {
		t.Fatal(err)
	}
	var got Request
	fd, err := ReadMessage(b, &got)
	if err != nil || fd < 0 {
		t.Fatalf("%v %d", err, fd)
	}
	defer syscall.Close(fd)
	var st1, st2 syscall.Stat_t
	syscall.Fstat(fd, &st1)
	syscall.Fstat(int(f.Fd()), &st2)
	if st1.Rdev != st2.Rdev || got.Source != want.Source || got.Env["HF_TOKEN"] != "t" || got.Options[0] != "repo" {
		t.Fatalf("%+v", got)
	}
}

// FuzzReadMessage: whatever bytes come, a message or an error, never a
// panic nor a huge allocation.  `go test -fuzz FuzzReadMessage
// ./internal/launch` fuzzes; go test runs the seeds.
func FuzzReadMessage(f *testing.F) {
	f.Add([]byte("\x00\x00\x00\x02{}"))
	f.Add([]byte("\xff\xff\xff\xff"))
	f.Add([]byte("\x00\x00\x00\x10{\"source\": 1}"))
	f.Add([]byte("\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		a, b := pair(t)
		defer b.Close()
		go func() {
			a.Write(data)
			a.Close()
		}()
		var r Request
		if fd, err := ReadMessage(b, &r); err == nil && fd >= 0 {
			syscall.Close(fd)
		}
	})
}
