package webhook

import (
	"fmt"
	"net"
	"net/netip"
	"syscall"
)

// refused are the address ranges a webhook may not reach unless the
// operator allows private addresses: a webhook URL is user input, and
// desk's host usually sits next to things that trust it (its own API on
// loopback, a cloud metadata service, the private network).
var refused = func() []netip.Prefix {
	var ps []netip.Prefix
	for _, s := range []string{
		"0.0.0.0/8",          // "this network"; 0.0.0.0 dials loopback
		"10.0.0.0/8",         // private
		"100.64.0.0/10",      // carrier-grade NAT
		"127.0.0.0/8",        // loopback
		"169.254.0.0/16",     // link-local, cloud metadata (169.254.169.254)
		"172.16.0.0/12",      // private
		"192.0.0.0/24",       // IETF protocol assignments (192.0.0.192: Oracle metadata)
		"192.168.0.0/16",     // private
		"198.18.0.0/15",      // benchmarking
		"224.0.0.0/4",        // multicast
		"240.0.0.0/4",        // reserved, broadcast
		"::/128",             // unspecified
		"::1/128",            // loopback
		"64:ff9b::/96",       // NAT64 (could embed a private IPv4)
		"64:ff9b:1::/48",     // local NAT64
		"fc00::/7",           // unique local (fd00:ec2::254: AWS metadata)
		"fe80::/10",          // link-local
		"ff00::/8",           // multicast
		"2001:db8::/32",      // documentation
		"100::/64",           // discard
		"2002::/16",          // 6to4 (embeds an IPv4 address)
		"2001::/32",          // Teredo (embeds an IPv4 address)
		"::ffff:0:0/96",      // IPv4-mapped, checked unmapped as well
		"fec0::/10",          // deprecated site-local
		"255.255.255.255/32", // broadcast
	} {
		ps = append(ps, netip.MustParsePrefix(s))
	}
	return ps
}()

// refusedAddr says why a webhook may not reach ip, or "" when it may.
func refusedAddr(ip netip.Addr) string {
	if !ip.IsValid() {
		return "not an IP address"
	}
	ip = ip.WithZone("")
	for _, a := range []netip.Addr{ip, ip.Unmap()} {
		for _, p := range refused {
			if p.Contains(a) {
				return fmt.Sprintf("%s is in %s, which webhooks may not reach (loopback, private, link-local or metadata; the operator can allow it with DESK_WEBHOOK_ALLOW_PRIVATE)", ip, p)
			}
		}
	}
	return ""
}

// dialControl is the net.Dialer Control of webhook connections: it runs
// after name resolution, on the very address being connected to, so a
// name that resolves to a public address when the webhook is created
// and to a private one later (DNS rebinding) is refused all the same.
func dialControl(allowPrivate bool) func(network, address string, _ syscall.RawConn) error {
	return func(network, address string, _ syscall.RawConn) error {
		if allowPrivate {
			return nil
		}
		host, _, err := net.SplitHostPort(address)
		if err != nil {
			return fmt.Errorf("webhook dial %s: %w", address, err)
		}
		ip, err := netip.ParseAddr(host)
		if err != nil {
			return fmt.Errorf("webhook dial %s: not an IP address", address)
		}
		if why := refusedAddr(ip); why != "" {
			return fmt.Errorf("webhook dial refused: %s", why)
		}
		return nil
	}
}
