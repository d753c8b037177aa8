package driver

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestClassify(t *testing.T) {
	cases := map[string]string{
		"8.8.8.8":                              "",
		"151.101.1.1":                          "",
		"2606:4700::1111":                      "",
		"127.0.0.1":                            "loopback",
		"127.255.0.9":                          "loopback",
		"::1":                                  "loopback",
		"169.254.169.254":                      "metadata",
		"169.254.1.1":                          "link-local",
		"fe80::1":                              "link-local",
		"fd00:ec2::254":                        "metadata",
		"100.100.100.200":                      "metadata",
		"10.0.0.1":                             "private",
		"172.16.5.4":                           "private",
		"172.31.255.255":                       "private",
		"192.168.1.1":                          "private",
		"100.64.0.1":                           "private",
		"fc00::1":                              "private",
		"fd12:3456::1":                         "private",
		"0.0.0.0":                              "unspecified",
		"0.1.2.3":                              "unspecified",
		"::":                                   "unspecified",
		"224.0.0.1":                            "multicast",
		"ff02::1":                              "multicast",
		"255.255.255.255":                      "reserved",
		"240.0.0.1":                            "reserved",
		"192.0.0.192":                          "reserved",
		"::ffff:169.254.169.254":               "metadata",
		"::ffff:127.0.0.1":                     "loopback",
		"::ffff:a9fe:a9fe":                     "metadata",
		"::ffff:8.8.8.8":                       "",
		"::127.0.0.1":                          "reserved",
		"64:ff9b::a9fe:a9fe":                   "metadata",
		"64:ff9b::808:808":                     "",
		"2002:7f00:1::":                        "loopback",
		"2002:a9fe:a9fe::1":                    "metadata",
		"2001:db8::1":                          "reserved",
		"fe80::1%eth0":                         "link-local",
		"172.32.0.1":                           "",
		"fec0::1":                              "reserved",
		"2001:0:4136:e378:8000:63bf:3fff:fdd2": "reserved",
		"64:ff9b:1::a9fe:a9fe":                 "local-use NAT64",
		"64:ff9b:1:a9fe:a9:fe00::":             "local-use NAT64",
		"::ffff:0:a9fe:a9fe":                   "IPv4-translated",
		"64:ff9b:2::1":                         "",
	}
	for s, want := range cases {
		a, err := netip.ParseAddr(s)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		got := Classify(a)
		if (want == "") != (got == "") || !strings.Contains(got, want) {
			t.Errorf("Classify(%s) = %q, want %q", s, got, want)
		}
	}
}

func TestHostOf(t *testing.T) {
	ok := map[string]string{
		"http://example.com/m.safetensors":                    "example.com",
		"HTTPS://Example.COM:8443/x":                          "example.com",
		"http://example.com./x":                               "example.com",
		"http://[::1]:8080/x":                                 "::1",
		"http://[::ffff:169.254.169.254]/x":                   "::ffff:169.254.169.254",
		"http://169.254.169.254/latest/":                      "169.254.169.254",
		"http://169.254.169.254./latest/":                     "169.254.169.254",
		"http://127.0.0.1:9000?x=1":                           "127.0.0.1",
		"http://a-b.c0.example#f":                             "a-b.c0.example",
		"hf://org/m@0123456789abcdef0123456789abcdef01234567": "",
		"s3://bucket/key":                                     "",
		"/models/m":                                           "",
	}
	for src, want := range ok {
		h, _, err := HostOf(src)
		if err != nil || h != want {
			t.Errorf("HostOf(%s) = %q, %v; want %q", src, h, err, want)
		}
	}
	bad := map[string]string{
		"http://2852039166/":                    "dotted quad",
		"http://0251.0376.0251.0376/":           "dotted quad",
		"http://0xa9.0xfe.0xa9.0xfe/":           "dotted quad",
		"http://0xa9fea9fe/":                    "dotted quad",
		"http://169.254.43518/":                 "dotted quad",
		"http://169.0376.169.254/":              "dotted quad",
		"http://127.1/":                         "dotted quad",
		"http://example.0x/":                    "dotted quad",
		"http://example.com@169.254.169.254/":   "user info",
		"http://169.254.169.254\\@example.com/": "user info",
		"http://%31%36%39.254.169.254/":         "user info",
		"http://[fe80::1%25eth0]/":              "user info",
		"http://exa mple.com/":                  "not a host name",
		"http://example_com/":                   "not a host name",
		"http://[::1/":                          "unclosed",
		"http://[1.2.3.4]/":                     "IPv6",
		"http://example.com:80a/":               "port",
		"http://example.com:/":                  "port",
		"http:///x":                             "not a host name",
	}
	for src, says := range bad {
		if _, _, err := HostOf(src); err == nil || !strings.Contains(err.Error(), says) {
			t.Errorf("HostOf(%s): %v, want %q", src, err, says)
		}
	}
}

func TestParsePolicy(t *testing.T) {
	for _, bad := range []string{"10.0.0.0/33", "a_b", "1.2.3.4.5", "fe80::1%eth0", "**.x", "2852039166", "x.0x10"} {
		if _, err := ParsePolicy(bad); err == nil {
			t.Errorf("ParsePolicy(%q): no error", bad)
		}
	}
	p, err := ParsePolicy(" models.example.com, .cdn.example, 10.1.0.0/16,127.0.0.1, ::1 ,[fd00::7]")
	if err != nil {
		t.Fatal(err)
	}
	if p.public || !p.names["models.example.com"] || len(p.suffixes) != 1 || len(p.nets) != 4 {
		t.Errorf("%+v", p)
	}
}

// policyCheck: p.Check with a fixed DNS.
func policyCheck(t *testing.T, list, src string) error {
	t.Helper()
	p, err := ParsePolicy(list)
	if err != nil {
		t.Fatal(err)
	}
	dns := map[string][]string{
		"models.example.com":       {"151.101.1.1", "2606:4700::1"},
		"a.cdn.example":            {"151.101.2.2"},
		"metadata.google.internal": {"169.254.169.254"},
		"rebind.example.com":       {"151.101.1.1", "127.0.0.1"},
		"mirror.internal":          {"10.1.2.3"},
		"mapped.example.com":       {"::ffff:169.254.169.254"},
	}
	p.lookup = func(ctx context.Context, host string) ([]netip.Addr, error) {
		var out []netip.Addr
		for _, s := range dns[host] {
			out = append(out, netip.MustParseAddr(s))
		}
		if out == nil {
			return nil, fmt.Errorf("no such host")
		}
		return out, nil
	}
	return p.Check(context.Background(), src)
}

func TestPolicyCheck(t *testing.T) {
	type c struct {
		list, src string
		code      codes.Code
		says      string
	}
	cases := []c{
		// default: any public host
		{"", "https://models.example.com/m.safetensors", codes.OK, ""},
		{"*", "http://151.101.1.1/x", codes.OK, ""},
		{"", "hf://org/m@0123456789abcdef0123456789abcdef01234567", codes.OK, ""},
		{"", "s3://b/k", codes.OK, ""},
		{"", "/models/m", codes.OK, ""},
		{"", "http://169.254.169.254/latest/meta-data/", codes.PermissionDenied, "metadata"},
		{"", "http://[fd00:ec2::254]/latest/", codes.PermissionDenied, "metadata"},
		{"", "http://[::ffff:169.254.169.254]/", codes.PermissionDenied, "metadata"},
		{"", "http://[::ffff:a9fe:a9fe]/", codes.PermissionDenied, "metadata"},
		{"", "http://metadata.google.internal/", codes.PermissionDenied, "metadata"},
		{"", "http://mapped.example.com/", codes.PermissionDenied, "metadata"},
		{"", "http://127.0.0.1:8080/x", codes.PermissionDenied, "loopback"},
		{"", "http://localhost:8080/x", codes.PermissionDenied, "loopback"},
		{"", "http://a.localhost/x", codes.PermissionDenied, "loopback"},
		{"", "http://[::1]/x", codes.PermissionDenied, "loopback"},
		{"", "http://0.0.0.0/x", codes.PermissionDenied, "unspecified"},
		{"", "http://[fe80::1]/x", codes.PermissionDenied, "link-local"},
		{"", "http://10.96.0.1/x", codes.PermissionDenied, "private"},
		{"", "http://mirror.internal/x", codes.PermissionDenied, "private"},
		{"", "http://rebind.example.com/x", codes.PermissionDenied, "loopback"},
		{"", "http://2852039166/", codes.InvalidArgument, "dotted quad"},
		{"", "http://0251.0376.0251.0376/", codes.InvalidArgument, "dotted quad"},
		{"", "http://nowhere.example/x", codes.Unavailable, "does not resolve"},
		// an explicit entry
		{"127.0.0.1", "http://127.0.0.1:8080/x", codes.OK, ""},
		{"127.0.0.1", "http://127.0.0.2:8080/x", codes.PermissionDenied, "loopback"},
		{"127.0.0.1", "http://[::1]:8080/x", codes.PermissionDenied, "loopback"},
		{"127.0.0.1", "http://[::ffff:127.0.0.1]:8080/x", codes.OK, ""},
		{"127.0.0.1", "https://models.example.com/x", codes.PermissionDenied, "not one"},
		{"127.0.0.1", "http://151.101.1.1/x", codes.PermissionDenied, "not one"},
		{"127.0.0.1,*", "https://models.example.com/x", codes.OK, ""},
		{"127.0.0.1,*", "http://169.254.169.254/", codes.PermissionDenied, "metadata"},
		{"10.0.0.0/8", "http://mirror.internal/x", codes.OK, ""},
		{"10.0.0.0/8", "http://10.96.0.1/x", codes.OK, ""},
		{"10.0.0.0/8", "https://models.example.com/x", codes.PermissionDenied, "not one"},
		{"mirror.internal", "http://mirror.internal/x", codes.PermissionDenied, "private"},
		{"mirror.internal,10.1.2.3", "http://mirror.internal/x", codes.OK, ""},
		{"models.example.com", "https://models.example.com/x", codes.OK, ""},
		{"models.example.com", "https://a.cdn.example/x", codes.PermissionDenied, "not one"},
		{".cdn.example", "https://a.cdn.example/x", codes.OK, ""},
		{"*.cdn.example", "https://a.cdn.example/x", codes.OK, ""},
		{"*.cdn.example", "https://metadata.google.internal/x", codes.PermissionDenied, "metadata"},
		{"rebind.example.com", "http://rebind.example.com/x", codes.PermissionDenied, "loopback"},
		{"169.254.0.0/16", "http://169.254.169.254/", codes.OK, ""},
		{"::ffff:127.0.0.0/104", "http://127.0.0.2/", codes.OK, ""},
		{"::ffff:127.0.0.0/104", "http://[::1]/", codes.PermissionDenied, "loopback"},
		{"models.example.com.", "https://models.example.com./x", codes.OK, ""},
	}
	for _, x := range cases {
		err := policyCheck(t, x.list, x.src)
		st, _ := status.FromError(err)
		if st.Code() != x.code || !strings.Contains(st.Message(), x.says) {
			t.Errorf("--allow-hosts=%q %s: %v, want %v %q", x.list, x.src, err, x.code, x.says)
		}
	}
}

func TestLimits(t *testing.T) {
	l := Limits{Threads: 8, Connections: 16}
	for opts, says := range map[string]string{
		"threads=8,connections=16": "",
		"threads=9":                "at most threads=8 (the plugin's --max-threads)",
		"repo,connections=17":      "at most connections=16 (the plugin's --max-connections)",
		"connections=999":          "at most connections=16",
	} {
		v, err := ParseVolume(map[string]string{"source": "/m", "options": opts}, nil)
		if err != nil {
			t.Fatal(err)
		}
		err = l.Check(v)
		if (says == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), says)) {
			t.Errorf("%s: %v, want %q", opts, err, says)
		}
	}
	v, _ := ParseVolume(map[string]string{"source": "/m", "options": "threads=200"}, nil)
	if err := (Limits{}).Check(v); err != nil {
		t.Errorf("no limit: %v", err)
	}
}

func TestStfsOptions(t *testing.T) {
	p, err := ParsePolicy("*,models.example.com,127.0.0.1,10.0.0.0/8,::1,fd00::/8")
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(p.StfsOptions("https://models.example.com/m.safetensors"), ",")
	want := "public_net,allow_net=127.0.0.1/32,allow_net=10.0.0.0/8,allow_net=::1/128,allow_net=fd00::/8"
	if got != want {
		t.Errorf("%s, want %s", got, want)
	}
	for _, src := range []string{"hf://org/m@0123456789abcdef0123456789abcdef01234567", "s3://b/k", "/models/m"} {
		if o := p.StfsOptions(src); o != nil {
			t.Errorf("%s: %v", src, o)
		}
	}
	// fail closed: an http(s):// source whose host cannot be read (Check
	// refuses it first) still gets public_net, should it ever be started
	for _, src := range []string{"http://x@127.0.0.1/m", "HTTPS://[::1/m", "http://127.1/m"} {
		if o := p.StfsOptions(src); len(o) == 0 || o[0] != "public_net" {
			t.Errorf("%s: %v", src, o)
		}
	}
	if o, _ := ParsePolicy(""); strings.Join(o.StfsOptions("http://x.example/m"), ",") != "public_net" {
		t.Errorf("the default: %v", o.StfsOptions("http://x.example/m"))
	}
	many := strings.Repeat("10.0.0.1,", 17)
	if _, err := ParsePolicy(many); err == nil || !strings.Contains(err.Error(), "at most 16") {
		t.Errorf("17 addresses: %v", err)
	}
}

// TestKeyHoldsPolicy: a daemon is named by the stfs options the node's
// policy gave it too, so that one started under another policy (before
// the plugin had one, or with another --allow-hosts, and adopted after a
// restart) is never handed to a new publish: that one starts its own,
// with public_net and this policy's allow_net=.
func TestKeyHoldsPolicy(t *testing.T) {
	star, _ := ParsePolicy("*")
	wide, _ := ParsePolicy("*,10.0.0.0/8")
	drv := func(p *Policy) *Driver { return &Driver{cfg: Config{Policy: p}, nodeKey: testKey} }
	web, _ := ParseVolume(map[string]string{"source": "https://models.example.com/m.safetensors"}, nil)
	if k := web.Key(testKey); drv(star).key(web) == k {
		t.Error("an http(s):// daemon's key is that of one started without public_net")
	}
	if drv(star).key(web) == drv(wide).key(web) {
		t.Error("one key for daemons under two policies (allow_net= differs)")
	}
	if drv(star).key(web) != drv(star).key(web) {
		t.Error("one volume and policy, two keys")
	}
	// an hf:// or s3:// source is not given public_net: its key as it was
	hub, _ := ParseVolume(map[string]string{"source": "hf://org/m@0123456789abcdef0123456789abcdef01234567"}, nil)
	if drv(star).key(hub) != hub.Key(testKey) || drv(wide).key(hub) != hub.Key(testKey) {
		t.Error("an hf:// daemon's key changed with the policy")
	}
}

// TestPolicyCheckTellsNoAddress: the volume's author is told the class
// of a name's address, never the address (the node's resolver is not an
// oracle of the node's internal names), nor the resolver's own address
// that a lookup error carries; the plugin's log has both.
func TestPolicyCheckTellsNoAddress(t *testing.T) {
	err := policyCheck(t, "", "http://mirror.internal/x")
	if st, _ := status.FromError(err); st.Code() != codes.PermissionDenied ||
		!strings.Contains(st.Message(), "a private address") || strings.Contains(st.Message(), "10.1.2.3") {
		t.Errorf("a name's address: %v", err)
	}
	p, _ := ParsePolicy("")
	p.lookup = func(ctx context.Context, host string) ([]netip.Addr, error) {
		return nil, fmt.Errorf("lookup %s on 10.96.0.10:53: no such host", host)
	}
	err = p.Check(context.Background(), "http://vault.internal/x")
	if st, _ := status.FromError(err); st.Code() != codes.Unavailable ||
		!strings.Contains(st.Message(), "does not resolve") || strings.Contains(st.Message(), "10.96.0.10") {
		t.Errorf("a lookup error: %v", err)
	}
	// a literal address is the author's own: said as written
	err = policyCheck(t, "", "http://10.96.0.1/x")
	if st, _ := status.FromError(err); !strings.Contains(st.Message(), "10.96.0.1") {
		t.Errorf("a literal address: %v", err)
	}
}
