// policy.go: which hosts a volume's source may make the node fetch from.
// A pod author names the source; the node fetches it, with the node's
// network position: without a policy a pod could have the node ask the
// cloud's metadata service (its credentials), a service on the node's
// loopback, or the cluster's internal network.  The operator's
// --allow-hosts says which hosts an http(s):// source may name; by
// default any public host, and never (unless an entry covers it) one that
// is, or resolves to, a loopback, link-local, private, unspecified,
// multicast or otherwise reserved address.  hf:// and s3:// sources are
// fetched from the node's own endpoints (HF_ENDPOINT, AWS_ENDPOINT_URL on
// the launcher): the operator's, not checked here.
package driver

import (
	"context"
	"fmt"
	"log"
	"net"
	"net/netip"
	"regexp"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Policy is the plugin's --allow-hosts, parsed.
type Policy struct {
	public   bool            // "*": any public host
	names    map[string]bool // exact host names
	suffixes []string        // ".example.com": its subdomains
	nets     []netip.Prefix  // addresses allowed whatever their class
	// lookup resolves a name (net.DefaultResolver; tests replace it)
	lookup func(ctx context.Context, host string) ([]netip.Addr, error)
}

// hostName: a DNS name as a URL may carry it (lowercase letters, digits,
// hyphens, dots), no other character: nothing curl and Go could read
// apart (percent-escapes, backslashes, spaces, user info).
var hostName = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*\.?$`)

// numericLabel: a label curl (and the WHATWG URL standard) reads as a
// number, which makes the whole host an IPv4 address: decimal, octal
// (a leading 0) or hexadecimal (0x)
var numericLabel = regexp.MustCompile(`^([0-9]+|0x[0-9a-f]*)$`)

// ParsePolicy parses --allow-hosts: comma-separated entries, each "*"
// (any public host), a CIDR or an address (that range, whatever its
// class), a host name (that name, whose addresses must still be public
// unless a CIDR entry covers them), or ".NAME" / "*.NAME" (NAME's
// subdomains, the same way).  "" is "*".
func ParsePolicy(list string) (*Policy, error) {
	p := &Policy{names: map[string]bool{}, lookup: lookupHost}
	if strings.TrimSpace(list) == "" {
		p.public = true
		return p, nil
	}
	for _, e := range strings.Split(list, ",") {
		e = strings.TrimSuffix(strings.ToLower(strings.TrimSpace(e)), ".")
		switch {
		case e == "":
		case e == "*":
			p.public = true
		case strings.Contains(e, "/"):
			pfx, err := netip.ParsePrefix(e)
			if err != nil {
				return nil, fmt.Errorf("--allow-hosts %q: not a CIDR (%v)", e, err)
			}
			if a := pfx.Addr(); a.Is4In6() && pfx.Bits() >= 96 {
				// ::ffff:a.b.c.d/N: addresses are checked unmapped
				pfx = netip.PrefixFrom(a.Unmap(), pfx.Bits()-96)
			}
			p.nets = append(p.nets, pfx.Masked())
		case strings.Contains(e, ":") || isDottedQuad(e):
			a, err := netip.ParseAddr(strings.Trim(e, "[]"))
			if err != nil || a.Zone() != "" {
				return nil, fmt.Errorf("--allow-hosts %q: not an address", e)
			}
			a = a.Unmap()
			p.nets = append(p.nets, netip.PrefixFrom(a, a.BitLen()))
		default:
			sub := strings.TrimPrefix(strings.TrimPrefix(e, "*"), ".")
			if !hostName.MatchString(sub) || numericHost(sub) {
				return nil, fmt.Errorf("--allow-hosts %q: not a host name, a .DOMAIN, an address or a CIDR", e)
			}
			if sub != e && "."+sub != e && "*."+sub != e {
				return nil, fmt.Errorf("--allow-hosts %q: not a host name, a .DOMAIN, an address or a CIDR", e)
			}
			if strings.HasPrefix(e, ".") || strings.HasPrefix(e, "*.") {
				p.suffixes = append(p.suffixes, "."+sub)
			} else {
				p.names[sub] = true
			}
		}
	}
	if len(p.nets) > maxNets {
		return nil, fmt.Errorf("--allow-hosts: at most %d addresses and CIDRs (stfs's allow_net=)", maxNets)
	}
	return p, nil
}

// maxNets: stfs takes at most so many -o allow_net=
const maxNets = 16

// StfsOptions: the stfs -o options that make a daemon hold every
// connection (the source's host, each redirect's, each retry's) to the
// same rule as Check does for the URL: public_net (an address that is not
// public is refused when connected to, so a redirect or a name that
// resolves otherwise later cannot reach one), and allow_net= for each
// ADDRESS or CIDR entry.  For http(s):// sources only: hf:// and s3://
// go to the node's own endpoints.  An http(s):// source whose host
// cannot be read (Check refuses it) gets them too: closed, not open.
func (p *Policy) StfsOptions(src string) []string {
	l := strings.ToLower(src)
	if !strings.HasPrefix(l, "http://") && !strings.HasPrefix(l, "https://") {
		return nil
	}
	opts := []string{"public_net"}
	for _, n := range p.nets {
		opts = append(opts, "allow_net="+n.String())
	}
	return opts
}

func lookupHost(ctx context.Context, host string) ([]netip.Addr, error) {
	return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
}

func isDottedQuad(s string) bool {
	a, err := netip.ParseAddr(s)
	return err == nil && a.Is4()
}

// numericHost: curl would read host (lowercase, no trailing dot) as an
// IPv4 address: its last label is a number.
func numericHost(host string) bool {
	labels := strings.Split(strings.TrimSuffix(host, "."), ".")
	return numericLabel.MatchString(labels[len(labels)-1])
}

// special are the ranges that are not the public internet (besides what
// netip's own predicates say): each with what it is, for the message.
var special = []struct {
	pfx  netip.Prefix
	what string
}{
	{netip.MustParsePrefix("169.254.169.254/32"), "the cloud metadata service's"},
	{netip.MustParsePrefix("fd00:ec2::254/128"), "the cloud metadata service's"},
	{netip.MustParsePrefix("100.100.100.200/32"), "the cloud metadata service's"},
	{netip.MustParsePrefix("0.0.0.0/8"), "an unspecified (this host)"},
	{netip.MustParsePrefix("100.64.0.0/10"), "a private (shared, RFC 6598)"},
	{netip.MustParsePrefix("192.0.0.0/24"), "a reserved (IETF protocol)"},
	{netip.MustParsePrefix("192.0.2.0/24"), "a reserved (documentation)"},
	{netip.MustParsePrefix("198.18.0.0/15"), "a reserved (benchmarking)"},
	{netip.MustParsePrefix("198.51.100.0/24"), "a reserved (documentation)"},
	{netip.MustParsePrefix("203.0.113.0/24"), "a reserved (documentation)"},
	{netip.MustParsePrefix("240.0.0.0/4"), "a reserved (class E, broadcast)"},
	{netip.MustParsePrefix("::/96"), "a reserved (IPv4-compatible)"},
	// a local translator may map these onto any IPv4 address
	{netip.MustParsePrefix("::ffff:0:0:0/96"), "a reserved (IPv4-translated)"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "a reserved (local-use NAT64)"},
	{netip.MustParsePrefix("100::/64"), "a reserved (discard)"},
	{netip.MustParsePrefix("2001::/23"), "a reserved (IETF protocol, Teredo)"},
	{netip.MustParsePrefix("2001:db8::/32"), "a reserved (documentation)"},
	{netip.MustParsePrefix("fec0::/10"), "a reserved (site-local)"},
}

var (
	nat64   = netip.MustParsePrefix("64:ff9b::/96")
	sixToFo = netip.MustParsePrefix("2002::/16")
)

// Classify says what kind of address a is when it is not a public
// unicast one ("a loopback", "a link-local", ...), else "".  An IPv6
// address that carries an IPv4 one (IPv4-mapped, NAT64, 6to4) is the
// IPv4 one's class; the local-use NAT64 and IPv4-translated prefixes,
// which a local translator may map onto any IPv4 address, are reserved.
func Classify(a netip.Addr) string {
	a = a.WithZone("").Unmap()
	for _, s := range special[:3] { // before link-local and private
		if s.pfx.Contains(a) {
			return s.what
		}
	}
	switch {
	case a.IsUnspecified():
		return "an unspecified"
	case a.IsLoopback():
		return "a loopback"
	case a.IsLinkLocalUnicast():
		return "a link-local"
	case a.IsMulticast():
		return "a multicast"
	case a.IsPrivate():
		return "a private"
	}
	for _, s := range special[3:] {
		if s.pfx.Contains(a) {
			return s.what
		}
	}
	if a.Is6() && (nat64.Contains(a) || sixToFo.Contains(a)) {
		b := a.As16()
		var v4 [4]byte
		if nat64.Contains(a) {
			copy(v4[:], b[12:16])
		} else {
			copy(v4[:], b[2:6])
		}
		if c := Classify(netip.AddrFrom4(v4)); c != "" {
			return c + " (embedded in " + a.String() + ")"
		}
	}
	return ""
}

// HostOf: the host an http(s):// source names (lowercase, no brackets,
// no trailing dot), and its address when it is one; "" for a source of
// another kind.  A host that curl and Go could read apart is an error:
// user info, percent-escapes, a zone, a numeric IPv4 form that is not a
// dotted quad (2852039166, 0251.0376.0251.0376, 0xa9.254.169.254).
func HostOf(src string) (string, netip.Addr, error) {
	l := strings.ToLower(src)
	rest := ""
	for _, s := range []string{"http://", "https://"} {
		if strings.HasPrefix(l, s) {
			rest = src[len(s):]
		}
	}
	if rest == "" {
		return "", netip.Addr{}, nil
	}
	auth := rest
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		auth = rest[:i]
	}
	if strings.ContainsAny(auth, "@\\%") {
		return "", netip.Addr{}, fmt.Errorf("source %s: the host part holds \"@\", \"\\\" or \"%%\" (user info or escapes): give a plain host", src)
	}
	host := auth
	if strings.HasPrefix(auth, "[") {
		end := strings.Index(auth, "]")
		if end < 0 {
			return "", netip.Addr{}, fmt.Errorf("source %s: an unclosed [", src)
		}
		host, auth = auth[1:end], auth[end+1:]
		a, err := netip.ParseAddr(host)
		if err != nil || !a.Is6() {
			return "", netip.Addr{}, fmt.Errorf("source %s: not an IPv6 address in [...]", src)
		}
		if err := checkPort(src, auth); err != nil {
			return "", netip.Addr{}, err
		}
		return strings.ToLower(host), a, nil
	}
	if i := strings.LastIndex(auth, ":"); i >= 0 {
		if err := checkPort(src, auth[i:]); err != nil {
			return "", netip.Addr{}, err
		}
		host = auth[:i]
	}
	host = strings.ToLower(host)
	if !hostName.MatchString(host) {
		return "", netip.Addr{}, fmt.Errorf("source %s: the host %q is not a host name or an address", src, host)
	}
	host = strings.TrimSuffix(host, ".")
	if numericHost(host) {
		a, err := netip.ParseAddr(host)
		if err != nil || !a.Is4() {
			return "", netip.Addr{}, fmt.Errorf("source %s: the host %q is a number but not a dotted quad (a.b.c.d in decimal): give the address so", src, host)
		}
		return host, a, nil
	}
	return host, netip.Addr{}, nil
}

func checkPort(src, p string) error {
	if p == "" {
		return nil
	}
	if len(p) < 2 || len(p) > 6 || p[0] != ':' || strings.Trim(p[1:], "0123456789") != "" {
		return fmt.Errorf("source %s: a bad port %q", src, p)
	}
	return nil
}

// nameAllowed: host (a name) is one --allow-hosts names.
func (p *Policy) nameAllowed(host string) bool {
	if p.public || p.names[host] {
		return true
	}
	for _, s := range p.suffixes {
		if strings.HasSuffix(host, s) {
			return true
		}
	}
	return false
}

func (p *Policy) netAllowed(a netip.Addr) bool {
	a = a.WithZone("").Unmap()
	for _, n := range p.nets {
		if n.Contains(a) {
			return true
		}
	}
	return false
}

// Check: whether the node may fetch src.  The host an http(s):// source
// names must be one --allow-hosts allows (by name, "*", or a CIDR holding
// every address it has), and each of its addresses (the literal one, or
// every one it resolves to now) public unless a CIDR entry covers it.
// Errors are gRPC statuses: InvalidArgument for a host that is not one,
// PermissionDenied for a host this node's policy refuses, Unavailable
// when the name does not resolve now.
func (p *Policy) Check(ctx context.Context, src string) error {
	host, addr, err := HostOf(src)
	if err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	if host == "" {
		return nil
	}
	addrs := []netip.Addr{addr}
	nameOK := false
	if !addr.IsValid() {
		nameOK = p.nameAllowed(host)
		if host == "localhost" || strings.HasSuffix(host, ".localhost") {
			addrs = []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.IPv6Loopback()}
		} else {
			c, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			addrs, err = p.lookup(c, host)
			if err != nil || len(addrs) == 0 {
				// the error names the node's resolver: the log's
				log.Printf("stfs-csi: source %s: the host %s does not resolve now (%v)", src, host, err)
				return status.Errorf(codes.Unavailable, "source %s: the host %s does not resolve now", src, host)
			}
		}
	}
	for _, a := range addrs {
		if p.netAllowed(a) {
			continue
		}
		if c := Classify(a); c != "" {
			if !addr.IsValid() {
				// what a name resolves to on the node is the
				// operator's to read (the log), not the volume's
				// author's: only its class is said
				log.Printf("stfs-csi: source %s: the host %s resolves to %s, %s address: refused", src, host, a.WithZone(""), c)
				return status.Errorf(codes.PermissionDenied, "source %s: the host %s resolves to %s address: refused by this node (the plugin's --allow-hosts)", src, host, c)
			}
			return status.Errorf(codes.PermissionDenied, "source %s: the host %s is %s, %s address: refused by this node (the plugin's --allow-hosts)", src, host, a.WithZone(""), c)
		}
		// a public address: by "*", or (a name) by the name
		if (addr.IsValid() && !p.public) || (!addr.IsValid() && !nameOK) {
			return status.Errorf(codes.PermissionDenied, "source %s: the host %s is not one this node's --allow-hosts allows", src, host)
		}
	}
	return nil
}
