// class.go: what a daemon's failure to start means, by the class stfs
// gives it in its exit status (stfs(1), EXIT STATUS): the origin could not
// be reached (allowOfflineCache may serve the node cache), or refused the
// credentials (their marker of acceptance goes: accepted.go), or neither.
// An stfs older than the classes exits 1 for every failure, and so does
// this one for an origin that answered HTTP 5xx after its retries: for
// status 1 alone the driver still reads stfs's words (offline.go's signs).
package driver

import "strings"

// stfs's exit statuses (src/fuse/mount.h).
const (
	exitFailed      = 1 // an invalid source, a failed mount: any class
	exitUsage       = 2
	exitNotFound    = 3 // HTTP 404/410, no such file
	exitRefused     = 4 // the credentials refused: HTTP 401/403
	exitUnreachable = 5 // no connection, DNS, a timeout, a stall
	exitPolicy      = 6 // refused by public_net, allow_net
)

// unreachable: whether the origin could not be reached.
func (e *stfsRefused) unreachable() bool {
	switch e.status {
	case exitUnreachable:
		return true
	case exitFailed:
		return originUnreachable(e.msg, e.source)
	}
	return false
}

// credentialsRefused: whether the origin refused the credentials
// themselves (not a missing file, nor a rate limit).
func (e *stfsRefused) credentialsRefused() bool {
	switch e.status {
	case exitRefused:
		return true
	case exitFailed:
		return credentialRefused.MatchString(strings.ReplaceAll(e.msg, e.source, ""))
	}
	return false
}
