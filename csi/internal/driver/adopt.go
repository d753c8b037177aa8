// adopt.go: what survives a restart of the plugin.  The daemons and their
// mounts do (they live in the launcher's container, the mounts on the
// node), and so do the pods' binds; the plugin's memory does not.  Each
// daemon's mount has beside it KEY.json (its source and options, never a
// credential); a plugin that starts finds every live mount under
// STATE/mounts, the targets bound from it (the same device in mountinfo),
// and takes them over: unpublish, the grace time, a second pod's publish
// and recovery work as before.  A daemon that was given credentials is
// mounted again after a crash only once a publish brings them again.  A
// dead mount with targets (its daemon went with the old plugin's pod) is
// mounted again the same way, on top of its targets' dead mounts.
package driver

import (
	"bufio"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

type meta struct {
	Source      string   `json:"source"`
	Options     []string `json:"options"`
	ReadaheadKB int      `json:"readaheadKB"`
	Secrets     bool     `json:"secrets"` // whether it had any: never what
	Offline     bool     `json:"offline,omitempty"`
}

func writeMeta(d *daemon) error {
	b, err := json.Marshal(meta{d.vol.Source, d.vol.Options, d.vol.ReadaheadKB, len(d.vol.Secrets) > 0, d.vol.Offline})
	if err != nil {
		return err
	}
	tmp := d.dir + ".json.tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, d.dir+".json")
}

// deviceOf: the device of mount point path in devs ("" if none).
func deviceOf(devs map[string][]string, path string) string {
	for dev, paths := range devs {
		for _, p := range paths {
			if p == path {
				return dev
			}
		}
	}
	return ""
}

// mountsByDevice: mount points by their device ("MAJOR:MINOR"), from
// /proc/self/mountinfo.
func mountsByDevice() (map[string][]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string][]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fl := strings.Fields(sc.Text())
		if len(fl) > 4 {
			out[fl[2]] = append(out[fl[2]], unescape(fl[4]))
		}
	}
	return out, sc.Err()
}

// Adopt takes over the daemons a previous run of the plugin left: the
// number adopted.  A mount there that is dead, or has no metadata, is
// unmounted with its targets (kubelet publishes them again).
func (drv *Driver) Adopt() (int, error) {
	dir := filepath.Join(drv.cfg.StateDir, "mounts")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	devs, err := mountsByDevice()
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		key, path := e.Name(), filepath.Join(dir, e.Name())
		if ok, _ := isMountPoint(path); !ok {
			os.Remove(path)
			os.Remove(path + ".json")
			continue
		}
		var st unix.Stat_t
		var m meta
		b, rerr := os.ReadFile(path + ".json")
		serr := unix.Stat(path, &st)
		dev := fmt.Sprintf("%d:%d", unix.Major(st.Dev), unix.Minor(st.Dev))
		if serr != nil { // a dead FUSE mount: its device by mountinfo
			dev = deviceOf(devs, path)
		}
		var targets []string
		for _, p := range devs[dev] {
			if p != path {
				targets = append(targets, p)
			}
		}
		known := rerr == nil && json.Unmarshal(b, &m) == nil
		live := known && serr == nil && alive(path, 5*time.Second)
		if !known || (!live && len(targets) == 0) {
			log.Printf("stfs-csi: %s: a dead or unknown mount: unmounted with its %d targets", key, len(targets))
			for _, t := range targets {
				unmountAll(t)
			}
			unmountAll(path)
			os.Remove(path)
			os.Remove(path + ".json")
			continue
		}
		d := &daemon{key: key, dir: path, live: live, targets: map[string]bool{},
			vol: &Volume{Source: m.Source, Options: m.Options, ReadaheadKB: m.ReadaheadKB, Secrets: map[string]string{},
				Offline: m.Offline},
			needsSecrets: m.Secrets && !m.Offline} // offline: no request, no credential
		drv.mu.Lock()
		for _, t := range targets {
			d.targets[t] = true
			drv.targets[t] = published{"", key}
		}
		drv.daemons[key] = d
		drv.mu.Unlock()
		if !live {
			// its daemon went with the old plugin's pod (the DaemonSet's
			// pod replaced): mounted again now, or at the next publish
			// that brings its credentials (kubelet publishes again:
			// requiresRepublish), bound on top of the dead mount that
			// each target keeps (a pod's container holds that one)
			log.Printf("stfs-csi: %s: the daemon of %s is gone: mounting it again for %d targets", key, m.Source, len(targets))
			d.mu.Lock()
			drv.restartLocked(d)
			d.mu.Unlock()
			n++
			continue
		}
		if len(targets) == 0 {
			d.mu.Lock()
			drv.releaseLocked(d, "")
			d.mu.Unlock()
		}
		log.Printf("stfs-csi: %s: adopted the daemon of %s with %d targets", key, m.Source, len(targets))
		n++
	}
	return n, nil
}
