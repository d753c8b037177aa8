// server.go: the launcher, `stfs-csi daemon`: the unprivileged side.
package launch

import (
	"bufio"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// Config of the launcher.
type Config struct {
	Socket string // where the driver connects
	Stfs   string // the stfs program
	// UID and GID to become when started as root (-1: stay)
	UID, GID int
}

// secretKeys are the only names a request may put in the daemon's
// environment (STFS_MIRROR_AWS_*: the keys stfs reads a mirror with,
// apart from the origin's).
var secretKeys = map[string]bool{
	"HF_TOKEN": true, "AWS_ACCESS_KEY_ID": true,
	"AWS_SECRET_ACCESS_KEY": true, "AWS_SESSION_TOKEN": true,
	"STFS_MIRROR_AWS_ACCESS_KEY_ID":     true,
	"STFS_MIRROR_AWS_SECRET_ACCESS_KEY": true,
	"STFS_MIRROR_AWS_SESSION_TOKEN":     true,
}

// passEnv: the launcher's own environment that reaches every daemon: where
// the origins are and which CAs to trust, the node's settings, never a
// credential.
var passEnv = []string{
	"HF_ENDPOINT", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL",
	"AWS_ENDPOINT_URL_S3", "CURL_CA_BUNDLE", "SSL_CERT_FILE",
	"SSL_CERT_DIR", "AWS_CA_BUNDLE", "REQUESTS_CA_BUNDLE", "TZ",
}

// Serve listens on cfg.Socket, drops to cfg.UID/GID (with no capability
// and no_new_privs) and starts a daemon for each connection, from its
// spawner thread (harden.go).  It returns only on error.
func Serve(cfg Config) error {
	if err := closeInherited(); err != nil {
		return fmt.Errorf("descriptors inherited: %v", err)
	}
	sp, err := newSpawner()
	if err != nil {
		return err
	}
	os.Remove(cfg.Socket)
	old := syscall.Umask(0o077)
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: cfg.Socket, Net: "unix"})
	syscall.Umask(old)
	if err != nil {
		return err
	}
	defer l.Close()
	if err := drop(cfg, cfg.Socket); err != nil {
		return err
	}
	if err := sp.check(); err != nil {
		return err
	}
	log.Printf("stfs-csi daemon: serving %s as uid %d", cfg.Socket, os.Getuid())
	for {
		c, err := l.AcceptUnix()
		if err != nil {
			return err
		}
		go handle(cfg, sp, c)
	}
}

// drop becomes cfg.UID/GID when root (every thread: Go's Setresuid); then
// no privilege can come back.
func drop(cfg Config, socket string) error {
	if os.Geteuid() == 0 && cfg.UID >= 0 {
		// the driver (root) still connects; no one else
		if err := os.Chown(socket, cfg.UID, cfg.GID); err != nil {
			return err
		}
		if err := syscall.Setgroups([]int{}); err != nil {
			return fmt.Errorf("setgroups: %v", err)
		}
		if err := syscall.Setresgid(cfg.GID, cfg.GID, cfg.GID); err != nil {
			return fmt.Errorf("setresgid: %v", err)
		}
		if err := syscall.Setresuid(cfg.UID, cfg.UID, cfg.UID); err != nil {
			return fmt.Errorf("setresuid: %v", err)
		}
	}
	if os.Geteuid() == 0 {
		return fmt.Errorf("the launcher runs as root: give --user UID:GID")
	}
	return unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
}

// tail keeps the last lines a daemon wrote.
type tail struct {
	mu    sync.Mutex
	lines []string
}

func (t *tail) add(s string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lines = append(t.lines, s)
	if len(t.lines) > 20 {
		t.lines = t.lines[1:]
	}
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Join(t.lines, "\n")
}

func handle(cfg Config, sp *spawner, c *net.UnixConn) {
	defer c.Close()
	var req Request
	fd, err := ReadMessage(c, &req)
	if err == io.EOF {
		return // the plugin's Probe: a connection and nothing else
	}
	if err != nil {
		log.Printf("stfs-csi daemon: a request: %v", err)
		return
	}
	fail := func(why string) {
		if fd >= 0 {
			syscall.Close(fd)
		}
		log.Printf("stfs-csi daemon: %s: %s", req.ID, why)
		WriteMessage(c, Event{Error: why}, -1)
	}
	if fd < 0 {
		fail("no /dev/fuse descriptor came with the request")
		return
	}
	if req.Source == "" || strings.HasPrefix(req.Source, "-") {
		fail("bad source")
		return
	}
	// AWS_EC2_METADATA_DISABLED: a volume with no AWS keys in its secret
	// must not fall back on the node's instance role (every pod could
	// read whatever buckets the node may)
	// STFS_CONFINE: stfs checks for itself that it holds no privilege
	// and no descriptor but its own (stfs(1)), whatever started it
	env := []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/nonexistent",
		"AWS_EC2_METADATA_DISABLED=true", "STFS_CONFINE=1"}
	for _, k := range passEnv {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	for k, v := range req.Env {
		if !secretKeys[k] {
			fail(fmt.Sprintf("environment variable %q is not one a volume may set", k))
			return
		}
		env = append(env, k+"="+v)
	}
	args := []string{cfg.Stfs, "mount", "-f"}
	for _, o := range req.Options {
		args = append(args, "-o", o)
	}
	args = append(args, req.Source, "/dev/fd/3")
	fuse := os.NewFile(uintptr(fd), "/dev/fuse")
	r, w, err := os.Pipe()
	if err != nil {
		fuse.Close()
		fail(err.Error())
		return
	}
	cmd := &exec.Cmd{Path: cfg.Stfs, Args: args, Env: env,
		ExtraFiles: []*os.File{fuse}, Stdout: w, Stderr: w,
		SysProcAttr: &syscall.SysProcAttr{Setsid: true}}
	// fork and exec on the stripped thread (harden.go)
	err = sp.do(cmd.Start)
	fuse.Close() // the daemon holds the only descriptor now
	w.Close()
	if err != nil {
		r.Close()
		fail(err.Error())
		return
	}
	log.Printf("stfs-csi daemon: %s: stfs pid %d serves %s", req.ID, cmd.Process.Pid, req.Source)
	WriteMessage(c, Event{Started: true, Pid: cmd.Process.Pid}, -1)
	var t tail
	done := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(io.LimitReader(r, 1<<30))
		for sc.Scan() {
			t.add(sc.Text())
			log.Printf("stfs-csi daemon: %s: %s", req.ID, sc.Text())
		}
		r.Close()
		close(done)
	}()
	err = cmd.Wait()
	<-done
	st := 0
	if err != nil {
		st = -1
		if ee, ok := err.(*exec.ExitError); ok {
			st = ee.ExitCode()
		}
	}
	log.Printf("stfs-csi daemon: %s: stfs pid %d exited (%d)", req.ID, cmd.Process.Pid, st)
	WriteMessage(c, Event{Exited: true, Status: st, Stderr: t.String()}, -1)
}
