// accepted.go: which credentials the origin accepted on this node, so that
// allowOfflineCache serves the node cache only to them.  When an online
// daemon starts (stfs opened its source: the origin accepted the source,
// options and credentials), STATE/accepted/KEY records it, KEY being the
// daemon's key; an offline fallback needs that marker.  A marker holds
// the source's name only, never a credential; it is renewed by each
// online start, removed when the origin refuses those credentials, and
// expires after acceptedFor.  The key hashes the credentials with a
// node-local random key (STATE/node.key, 0600), so that neither a marker's
// name nor a mount's directory can be checked against a guessed token
// elsewhere.
package driver

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"time"
)

// acceptedFor: a marker not renewed by an online start for so long is no
// longer honoured (and removed).
const acceptedFor = 30 * 24 * time.Hour

const nodeKeySize = 32

// credentialRefused: how stfs says in words that the origin refused the
// credentials themselves (not a missing file, nor a rate limit); read
// only when its exit status is 1 (class.go; an stfs older than the
// classes).
var credentialRefused = regexp.MustCompile(`(?i)HTTP (401|403)|restricted|forbidden|unauthori[sz]ed|access ?denied|signaturedoesnotmatch|invalidaccesskeyid|expiredtoken`)

// loadNodeKey reads STATE/node.key, made (random, 0600) if missing.
func loadNodeKey(stateDir string) ([]byte, error) {
	path := filepath.Join(stateDir, "node.key")
	for try := 0; try < 2; try++ {
		b, err := os.ReadFile(path)
		if err == nil {
			if len(b) != nodeKeySize {
				return nil, fmt.Errorf("%s: %d bytes, not %d (remove it: the markers of accepted credentials go with it)", path, len(b), nodeKeySize)
			}
			if err := os.Chmod(path, 0o600); err != nil {
				return nil, err
			}
			return b, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		k := make([]byte, nodeKeySize)
		if _, err := rand.Read(k); err != nil {
			return nil, err
		}
		tmp := fmt.Sprintf("%s.%d.tmp", path, os.Getpid())
		if err := os.WriteFile(tmp, k, 0o600); err != nil {
			return nil, err
		}
		// link: the first one made wins, a second reads it
		err = os.Link(tmp, path)
		os.Remove(tmp)
		if err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, err
		}
	}
	return nil, fmt.Errorf("%s: cannot be made", path)
}

func acceptedPath(stateDir, key string) string {
	return filepath.Join(stateDir, "accepted", key)
}

// markAccepted records (or renews) that the origin accepted the daemon of
// key, which serves source.
func markAccepted(stateDir, key, source string) error {
	path := acceptedPath(stateDir, key)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(source+"\n"), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// wasAccepted: whether the origin accepted the daemon of key on this node
// within acceptedFor of now.  An expired marker is removed.
func wasAccepted(stateDir, key string, now time.Time) bool {
	path := acceptedPath(stateDir, key)
	st, err := os.Stat(path)
	if err != nil || !st.Mode().IsRegular() {
		return false
	}
	if now.Sub(st.ModTime()) > acceptedFor {
		os.Remove(path)
		return false
	}
	return true
}

// forgetAccepted removes key's marker: the origin refused its credentials.
func forgetAccepted(stateDir, key string) {
	os.Remove(acceptedPath(stateDir, key))
}

// pruneAccepted removes the expired markers (at the plugin's start).
func pruneAccepted(stateDir string, now time.Time) {
	ents, _ := os.ReadDir(filepath.Join(stateDir, "accepted"))
	for _, e := range ents {
		wasAccepted(stateDir, e.Name(), now)
		if filepath.Ext(e.Name()) == ".tmp" {
			os.Remove(acceptedPath(stateDir, e.Name()))
		}
	}
}
