// harden.go: what a daemon holds, whichever of the launcher's threads
// took its request: no capability (effective, permitted, inheritable,
// ambient), an empty bounding set, no_new_privs, and no descriptor but the
// ones the launcher hands it.  no_new_privs, the bounding set and the
// capability sets belong to one OS thread, not to the process: every daemon
// is started (fork and exec) from one locked OS thread, the spawner, which
// holds them all and is checked before the launcher serves.
package launch

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// spawner: the one OS thread that starts the daemons.
type spawner struct {
	jobs chan func()
}

// newSpawner locks a new goroutine to its OS thread and strips that thread:
// the bounding set emptied (which needs CAP_SETPCAP: call it before the
// uid drops), the inheritable and ambient sets cleared, no_new_privs set.
// The uid drop (every thread) then clears the rest; check says whether it
// did.
func newSpawner() (*spawner, error) {
	s := &spawner{jobs: make(chan func())}
	ready := make(chan error)
	go func() {
		// never unlocked: every start runs on this thread
		runtime.LockOSThread()
		err := stripThread()
		ready <- err
		if err != nil {
			return // the thread ends with its goroutine
		}
		for job := range s.jobs {
			job()
		}
	}()
	if err := <-ready; err != nil {
		return nil, err
	}
	return s, nil
}

// do runs f on the spawner's thread.
func (s *spawner) do(f func() error) error {
	done := make(chan error, 1)
	s.jobs <- func() { done <- f() }
	return <-done
}

// check reads the spawner thread's own status: what every daemon starts
// with.  An error names what is left.
func (s *spawner) check() error {
	return s.do(func() error {
		b, err := os.ReadFile("/proc/thread-self/status")
		if err != nil {
			return err
		}
		return checkStatus(string(b))
	})
}

// checkStatus: NoNewPrivs 1 and every capability set empty, in the text of
// /proc/.../status.
func checkStatus(st string) error {
	want := map[string]bool{"NoNewPrivs": false, "CapInh": false, "CapPrm": false,
		"CapEff": false, "CapBnd": false, "CapAmb": false}
	for _, line := range strings.Split(st, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if _, known := want[k]; !ok || !known {
			continue
		}
		v = strings.TrimSpace(v)
		n, err := strconv.ParseUint(v, 16, 64)
		if err != nil {
			return fmt.Errorf("%s: %q", k, v)
		}
		if (k == "NoNewPrivs") != (n == 1) || (k != "NoNewPrivs" && n != 0) {
			return fmt.Errorf("the daemons would start with %s: %s", k, v)
		}
		want[k] = true
	}
	for k, seen := range want {
		if !seen {
			return fmt.Errorf("%s is not in the thread's status", k)
		}
	}
	return nil
}

// stripThread: the calling thread's bounding set emptied, its inheritable
// and ambient sets cleared, no_new_privs set.  A bounding set that holds a
// capability the thread may not drop (no CAP_SETPCAP) is an error: start
// the launcher as root with --user, or with an empty bounding set.
func stripThread() error {
	last := 63
	if b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap"); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			last = n
		}
	}
	for c := 0; c <= last; c++ {
		in, err := unix.PrctlRetInt(unix.PR_CAPBSET_READ, uintptr(c), 0, 0, 0)
		if err != nil || in == 0 {
			continue
		}
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil {
			return fmt.Errorf("the bounding set holds capability %d, which the launcher cannot drop (%v): start it as root with --user, or with an empty bounding set", c, err)
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fmt.Errorf("clear the ambient set: %v", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capget: %v", err)
	}
	data[0].Inheritable, data[1].Inheritable = 0, 0
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("clear the inheritable set: %v", err)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %v", err)
	}
	return nil
}

// closeInherited marks every descriptor from 3 on close-on-exec: what
// whoever started the launcher left open never reaches a daemon.  Where
// close_range is missing (Linux before 5.11, or a seccomp profile that
// refuses it) each descriptor in /proc/self/fd is marked.
func closeInherited() error {
	err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	if err == nil {
		return nil
	}
	ents, rerr := os.ReadDir("/proc/self/fd")
	if rerr != nil {
		return fmt.Errorf("close_range: %v; /proc/self/fd: %v", err, rerr)
	}
	for _, e := range ents {
		fd, aerr := strconv.Atoi(e.Name())
		if aerr != nil || fd < 3 {
			continue
		}
		// the directory's own descriptor is closed already: EBADF
		if _, ferr := unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC); ferr != nil && ferr != unix.EBADF {
			return fmt.Errorf("descriptor %d: %v", fd, ferr)
		}
	}
	return nil
}
