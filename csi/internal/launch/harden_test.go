package launch

import (
	"os"
	"runtime"
	"strings"
	"testing"
)

const stripped = "Name:\tstfs\nNoNewPrivs:\t1\nCapInh:\t0000000000000000\nCapPrm:\t0000000000000000\n" +
	"CapEff:\t0000000000000000\nCapBnd:\t0000000000000000\nCapAmb:\t0000000000000000\n"

// TestCheckStatus: only a status with no_new_privs and every set empty
// passes; each other value, and a missing line, is named.
func TestCheckStatus(t *testing.T) {
	if err := checkStatus(stripped); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ from, to, want string }{
		{"NoNewPrivs:\t1", "NoNewPrivs:\t0", "NoNewPrivs"},
		{"CapBnd:\t0000000000000000", "CapBnd:\t000001fffeffffff", "CapBnd"},
		{"CapInh:\t0000000000000000", "CapInh:\t0000000000000400", "CapInh"},
		{"CapAmb:\t0000000000000000", "CapAmb:\tzz", "CapAmb"},
		{"CapEff:\t0000000000000000\n", "", "CapEff"},
	} {
		err := checkStatus(strings.Replace(stripped, c.from, c.to, 1))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s -> %s: %v", c.from, c.to, err)
		}
	}
}

// TestStripThread: as root, a locked thread stripped by stripThread has
// no_new_privs and every capability set but the effective and permitted
// ones (which the uid drop clears) empty; the other threads keep theirs.
func TestStripThread(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the bounding set: root only")
	}
	res := make(chan string, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with it
		if err := stripThread(); err != nil {
			res <- "error: " + err.Error()
			return
		}
		b, err := os.ReadFile("/proc/thread-self/status")
		if err != nil {
			res <- "error: " + err.Error()
			return
		}
		res <- string(b)
	}()
	st := <-res
	for _, want := range []string{"NoNewPrivs:\t1", "CapBnd:\t0000000000000000",
		"CapInh:\t0000000000000000", "CapAmb:\t0000000000000000"} {
		if !strings.Contains(st, want+"\n") {
			t.Errorf("%s is not in %s", want, st)
		}
	}
	// the stripped thread ended (or is wedged) with its goroutine: this
	// one runs on another
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b, err := os.ReadFile("/proc/thread-self/status")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "CapBnd:\t0000000000000000\n") {
		t.Errorf("the main thread lost its bounding set too")
	}
}
