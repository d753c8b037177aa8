/*
 * netpolicy.c: -o public_net, which addresses a connection may go to.
 *
 * With public_net, every connection the remote layer opens (to the
 * source's host, to every host a redirect names, on every retry) is
 * checked on the address it is about to connect to, before a packet is
 * sent (libcurl's CURLOPT_OPENSOCKETFUNCTION): one that is not a public
 * unicast address (loopback, link-local with the cloud metadata service,
 * private, shared, unspecified, multicast, reserved; an IPv6 address that
 * carries such an IPv4 one; one of the prefixes a local translator may
 * map onto any IPv4 address, local-use NAT64 and IPv4-translated) is
 * refused, unless an -o allow_net=CIDR holds it.  Being the address
 * actually connected, the check holds for a name that resolves elsewhere
 * at each try (DNS rebinding) and for a redirect to any host.  The CSI node plugin sets it for the URLs a volume names
 * (docs/kubernetes.md).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "engine.h"
#include "http/http.h"

/* The ranges that are not the public internet, as IPv6 (IPv4 as
 * ::ffff:a.b.c.d, its prefix + 96), each with what it is. */
static const struct {
	const char *net;
	unsigned bits;
	const char *what;
} refused[] = {
	{ "::ffff:169.254.169.254", 128, "the cloud metadata service's" },
	{ "fd00:ec2::254", 128, "the cloud metadata service's" },
	{ "::ffff:100.100.100.200", 128, "the cloud metadata service's" },
	{ "::ffff:0.0.0.0", 104, "an unspecified (this host)" },
	{ "::ffff:127.0.0.0", 104, "a loopback" },
	{ "::ffff:169.254.0.0", 112, "a link-local" },
	{ "::ffff:10.0.0.0", 104, "a private" },
	{ "::ffff:172.16.0.0", 108, "a private" },
	{ "::ffff:192.168.0.0", 112, "a private" },
	{ "::ffff:100.64.0.0", 106, "a private (shared)" },
	{ "::ffff:192.0.0.0", 120, "a reserved" },
	{ "::ffff:192.0.2.0", 120, "a reserved (documentation)" },
	{ "::ffff:198.18.0.0", 111, "a reserved (benchmarking)" },
	{ "::ffff:198.51.100.0", 120, "a reserved (documentation)" },
	{ "::ffff:203.0.113.0", 120, "a reserved (documentation)" },
	{ "::ffff:224.0.0.0", 100, "a multicast" },
	{ "::ffff:240.0.0.0", 100, "a reserved (class E, broadcast)" },
	{ "::", 128, "an unspecified" },
	{ "::1", 128, "a loopback" },
	{ "::", 96, "a reserved (IPv4-compatible)" },
	{ "::ffff:0:0:0", 96, "a reserved (IPv4-translated)" },
	{ "64:ff9b:1::", 48, "a reserved (local-use NAT64)" },
	{ "100::", 64, "a reserved (discard)" },
	{ "2001::", 23, "a reserved (IETF protocol, Teredo)" },
	{ "2001:db8::", 32, "a reserved (documentation)" },
	{ "fc00::", 7, "a private" },
	{ "fe80::", 10, "a link-local" },
	{ "fec0::", 10, "a reserved (site-local)" },
	{ "ff00::", 8, "a multicast" },
};

static int in_net(const unsigned char a[16], const unsigned char net[16],
		  unsigned bits)
{
	unsigned whole = bits / 8, rest = bits % 8;

	if (memcmp(a, net, whole))
		return 0;
	return !rest || ((a[whole] ^ net[whole]) &
			 (unsigned char)(0xff << (8 - rest))) == 0;
}

/* a as an IPv6 address (IPv4 mapped), from a socket address: 0, or -1 if
 * it is neither. */
static int as6(const struct sockaddr *sa, unsigned char a[16])
{
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *s4 = (const void *)sa;

		memset(a, 0, 10);
		a[10] = a[11] = 0xff;
		memcpy(a + 12, &s4->sin_addr, 4);
		return 0;
	}
	if (sa->sa_family == AF_INET6) {
		memcpy(a, &((const struct sockaddr_in6 *)(const void *)sa)->
		       sin6_addr, 16);
		return 0;
	}
	return -1;
}

/* What a is when it is not a public unicast address, else NULL.  NAT64
 * (64:ff9b::/96) and 6to4 (2002::/16) are the class of the IPv4 address
 * they carry. */
static const char *classify(const unsigned char a[16])
{
	static const unsigned char nat64[12] = { 0, 0x64, 0xff, 0x9b };
	unsigned char net[16], v4[16] = { [10] = 0xff, [11] = 0xff };

	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		if (inet_pton(AF_INET6, refused[i].net, net) == 1 &&
		    in_net(a, net, refused[i].bits))
			return refused[i].what;
	}
	if (!memcmp(a, nat64, 12)) {
		memcpy(v4 + 12, a + 12, 4);
		return classify(v4);
	}
	if (a[0] == 0x20 && a[1] == 0x02) {
		memcpy(v4 + 12, a + 2, 4);
		return classify(v4);
	}
	return NULL;
}

int stfs_net_allow(struct stfs_net_policy *p, const char *cidr)
{
	char addr[INET6_ADDRSTRLEN + 8];
	const char *slash = strchr(cidr, '/');
	size_t alen = slash ? (size_t)(slash - cidr) : strlen(cidr);
	unsigned char a[16] = { [10] = 0xff, [11] = 0xff };
	unsigned long bits;
	char *end;
	int v4;

	if (alen == 0 || alen >= sizeof(addr))
		return -EINVAL;
	memcpy(addr, cidr, alen);
	addr[alen] = '\0';
	v4 = inet_pton(AF_INET, addr, a + 12) == 1;
	if (!v4 && inet_pton(AF_INET6, addr, a) != 1)
		return -EINVAL;
	bits = v4 ? 32 : 128;
	if (slash) {
		errno = 0;
		bits = strtoul(slash + 1, &end, 10);
		if (!slash[1] || strspn(slash + 1, "0123456789") !=
		    strlen(slash + 1) || errno || *end ||
		    bits > (v4 ? 32u : 128u))
			return -EINVAL;
	}
	if (p->n >= STFS_NET_ALLOW_MAX)
		return -E2BIG;
	memcpy(p->nets[p->n].a, a, 16);
	p->nets[p->n].bits = (unsigned)bits + (v4 ? 96 : 0);
	p->n++;
	return 0;
}

const char *stfs_net_refused(const struct stfs_net_policy *p,
			     const struct sockaddr *sa, char *shown,
			     size_t shownsz)
{
	unsigned char a[16];
	const char *what;

	if (as6(sa, a))
		return "not an Internet";
	for (unsigned i = 0; i < p->n; i++)
		if (in_net(a, p->nets[i].a, p->nets[i].bits))
			return NULL;
	if (!(what = classify(a)))
		return NULL;
	if (!memcmp(a, (unsigned char[12]){ [10] = 0xff, [11] = 0xff }, 12))
		inet_ntop(AF_INET, a + 12, shown, (socklen_t)shownsz);
	else
		inet_ntop(AF_INET6, a, shown, (socklen_t)shownsz);
	return what;
}

curl_socket_t stfs_net_opensocket(void *clientp, curlsocktype purpose,
				  struct curl_sockaddr *address)
{
	struct stfs_net_check *k = clientp;
	char shown[INET6_ADDRSTRLEN];
	const char *what;

	(void)purpose;
	shown[0] = '\0';
	what = stfs_net_refused(k->p, &address->addr, shown, sizeof(shown));
	if (what) {
		snprintf(k->why, sizeof(k->why), "a connection to %s refused: "
			 "%s address (public_net)", shown[0] ? shown : "?",
			 what);
		return CURL_SOCKET_BAD;
	}
	return socket(address->family, address->socktype | SOCK_CLOEXEC,
		      address->protocol);
}
