package driver

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestNodeKey(t *testing.T) {
	dir := t.TempDir()
	a, err := loadNodeKey(dir)
	if err != nil || len(a) != nodeKeySize {
		t.Fatal(a, err)
	}
	st, err := os.Stat(filepath.Join(dir, "node.key"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("node.key: %v %v", st, err)
	}
	b, err := loadNodeKey(dir) // a restart: the same key
	if err != nil || !bytes.Equal(a, b) {
		t.Fatal("another key after a restart")
	}
	c, _ := loadNodeKey(t.TempDir()) // another node: another key
	if bytes.Equal(a, c) {
		t.Fatal("two nodes, one key")
	}
	os.WriteFile(filepath.Join(dir, "node.key"), []byte("short"), 0o600)
	if _, err := loadNodeKey(dir); err == nil {
		t.Fatal("a short node.key taken")
	}
}

func TestKeyNodeKeyed(t *testing.T) {
	v, _ := ParseVolume(map[string]string{"source": "/m"}, map[string]string{"HF_TOKEN": "hf_secret"})
	other := []byte("another node's key, 32 bytes....")
	if v.Key(testKey) == v.Key(other) {
		t.Error("the key does not depend on the node's key")
	}
	if v.Key(testKey) != v.Key(testKey) {
		t.Error("one volume, two keys")
	}
}

func TestAccepted(t *testing.T) {
	dir := t.TempDir()
	src := "hf://org/gated@0123456789abcdef0123456789abcdef01234567"
	tok, _ := ParseVolume(map[string]string{"source": src}, map[string]string{"HF_TOKEN": "hf_good_token"})
	bad, _ := ParseVolume(map[string]string{"source": src}, map[string]string{"HF_TOKEN": "hf_other"})
	none, _ := ParseVolume(map[string]string{"source": src}, nil)
	opts, _ := ParseVolume(map[string]string{"source": src, "options": "npy"}, map[string]string{"HF_TOKEN": "hf_good_token"})
	now := time.Now()
	if wasAccepted(dir, tok.Key(testKey), now) {
		t.Fatal("accepted before any start")
	}
	if err := markAccepted(dir, tok.Key(testKey), src); err != nil {
		t.Fatal(err)
	}
	if !wasAccepted(dir, tok.Key(testKey), now) {
		t.Fatal("the accepted credentials not found")
	}
	for name, v := range map[string]*Volume{"another token": bad, "no token": none, "other options": opts} {
		if wasAccepted(dir, v.Key(testKey), now) {
			t.Errorf("%s: taken for the accepted one", name)
		}
	}
	// the marker: 0600, its name the key, its bytes the source; no secret
	path := filepath.Join(dir, "accepted", tok.Key(testKey))
	st, _ := os.Stat(path)
	b, _ := os.ReadFile(path)
	if st.Mode().Perm() != 0o600 || string(b) != src+"\n" || strings.Contains(path, "hf_good_token") {
		t.Errorf("marker %s: %v %q", path, st.Mode(), b)
	}
	// markers outlive the plugin (a file); expire after acceptedFor
	if !wasAccepted(dir, tok.Key(testKey), now.Add(acceptedFor-time.Hour)) {
		t.Error("expired early")
	}
	if wasAccepted(dir, tok.Key(testKey), now.Add(acceptedFor+time.Hour)) {
		t.Error("never expires")
	}
	if _, err := os.Stat(path); err == nil {
		t.Error("the expired marker stays")
	}
	// renewed by a start; forgotten when the origin refuses them
	markAccepted(dir, tok.Key(testKey), src)
	old := now.Add(-acceptedFor - time.Hour)
	markAccepted(dir, none.Key(testKey), src)
	os.Chtimes(filepath.Join(dir, "accepted", none.Key(testKey)), old, old)
	pruneAccepted(dir, now)
	if !wasAccepted(dir, tok.Key(testKey), now) || wasAccepted(dir, none.Key(testKey), now.Add(-2*acceptedFor)) {
		t.Error("pruned the wrong marker")
	}
	forgetAccepted(dir, tok.Key(testKey))
	if wasAccepted(dir, tok.Key(testKey), now) {
		t.Error("forgotten, still accepted")
	}
}

func TestCredentialRefused(t *testing.T) {
	for m, want := range map[string]bool{
		"stfs: hf://org/m@x: HTTP 401 (Unauthorized): the repo is restricted": true,
		"stfs: s3://b/k/: HTTP 403: SignatureDoesNotMatch":                    true,
		"stfs: hf://org/m@x: HTTP 404 (Not Found)":                            false,
		"stfs: hf://org/m@x: rate-limited (HTTP 429) after 3 waits":           false,
		"stfs: hf://org/m@x: Couldn't connect to server":                      false,
	} {
		if credentialRefused.MatchString(m) != want {
			t.Errorf("%s: not %v", m, want)
		}
	}
}
