// offline.go: allowOfflineCache.  A publish whose new daemon could not
// open its source because the origin cannot be reached (no connection, a
// name that does not resolve, a timeout, a stall, HTTP 5xx) is served,
// when the volume says allowOfflineCache: "true", by a daemon started
// with stfs's -o offline on the node cache: what earlier mounts of the
// source kept there (its listing, %repo/ files, the blocks read), with not
// one request; a block never fetched is EIO.  An origin that answers and
// refuses the credentials (401, 403) is never "unreachable": that publish
// is refused, whatever the volume says; and the fallback is given only
// to credentials the origin accepted for the source on this node
// (accepted.go).  The offline flag is part of the
// daemon's key, so an offline daemon is shared only by publishes that
// found the origin unreachable themselves.  stfs's exit status says
// whether the origin was reached (class.go); the signs below read its
// words only when it says 1 (an older stfs, or HTTP 5xx to the end).
package driver

import (
	"regexp"
	"strings"
)

// unreachableSigns: how stfs (libcurl's words, and its own for a stall
// and an HTTP status) says that the origin could not be reached.
var unreachableSigns = []string{
	"couldn't connect", "failed to connect", "connection refused",
	"could not resolve", "couldn't resolve", "no route to host",
	"network is unreachable", "timed out", "timeout was reached",
	"operation too slow", "connection reset", "empty reply from server",
	"failure when receiving data", "server returned nothing",
}

var (
	httpServerError = regexp.MustCompile(`\bHTTP 5[0-9][0-9]\b`)
	// an answer from the origin about the credentials, or a refusal
	// that is not about reaching it
	refusedSigns = regexp.MustCompile(`(?i)HTTP (401|403|404|410|429)|restricted|forbidden|unauthori[sz]ed|access ?denied|signaturedoesnotmatch|invalidaccesskeyid|expiredtoken`)
)

// originUnreachable: whether stfs's message msg, about source, says that
// the origin could not be reached.  The source's own name is taken out
// first (a bucket's key may be any words), and any sign of an answer about
// the credentials wins.
func originUnreachable(msg, source string) bool {
	if source != "" {
		msg = strings.ReplaceAll(msg, source, "")
	}
	if refusedSigns.MatchString(msg) {
		return false
	}
	if httpServerError.MatchString(msg) {
		return true
	}
	low := strings.ToLower(msg)
	for _, s := range unreachableSigns {
		if strings.Contains(low, s) {
			return true
		}
	}
	return false
}

// offline: v served from the node cache (a daemon of its own key).
func (v *Volume) offline() *Volume {
	o := *v
	o.Offline = true
	return &o
}
