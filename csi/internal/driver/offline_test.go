package driver

import (
	"strings"
	"testing"
)

func TestOriginUnreachable(t *testing.T) {
	src := "hf://org/m@0123456789abcdef0123456789abcdef01234567"
	yes := []string{
		"stfs: " + src + ": Failed to connect to 127.0.0.1 port 4321 after 0 ms: Couldn't connect to server",
		"stfs: " + src + ": Could not resolve host: huggingface.co",
		"stfs: " + src + ": Connection timed out after 10001 milliseconds",
		"stfs: " + src + ": Operation too slow. Less than 16384 bytes/sec transferred the last 30 seconds",
		"stfs: " + src + ": HTTP 503 (Service Unavailable)",
		"stfs: " + src + ": Recv failure: Connection reset by peer",
	}
	no := []string{
		"stfs: " + src + ": HTTP 401 (Unauthorized): the repo is restricted",
		"stfs: " + src + ": HTTP 403 (Forbidden): Couldn't connect",
		"stfs: " + src + ": access to this model is restricted (gated)",
		"stfs: " + src + ": HTTP 404 (Not Found)",
		"stfs: " + src + ": rate-limited (HTTP 429) after 3 waits",
		"stfs: " + src + ": SSL certificate problem: unable to get local issuer certificate",
		"stfs: " + src + ": not a model",
		"",
	}
	for _, m := range yes {
		if !originUnreachable(m, src) {
			t.Errorf("not unreachable: %s", m)
		}
	}
	for _, m := range no {
		if originUnreachable(m, src) {
			t.Errorf("unreachable: %s", m)
		}
	}
	// the source's own words do not count
	s3 := "s3://b/Couldn't connect to server/"
	if originUnreachable("stfs: "+s3+": HTTP 400 (Bad Request)", s3) {
		t.Error("the source's name taken for the reason")
	}
}

// FuzzOriginUnreachable: any message, never a panic; one that names an
// HTTP 401 or 403 outside the source's name is never an outage.  `go test
// -fuzz FuzzOriginUnreachable ./internal/driver` fuzzes; go test runs the
// seeds.
func FuzzOriginUnreachable(f *testing.F) {
	f.Add("stfs: s3://b/k: Failed to connect to h port 1 after 0 ms: Couldn't connect to server", "s3://b/k")
	f.Add("stfs: hf://o/m@x: HTTP 403 (Forbidden): Couldn't connect", "hf://o/m@x")
	f.Add("HTTP 503 HTTP 401", "")
	f.Fuzz(func(t *testing.T, msg, source string) {
		got := originUnreachable(msg, source)
		rest := msg
		if source != "" {
			rest = strings.ReplaceAll(msg, source, "")
		}
		if got && (strings.Contains(rest, "HTTP 401 ") || strings.Contains(rest, "HTTP 403 ")) {
			t.Fatalf("%q (source %q): taken for an outage", msg, source)
		}
	})
}
