package webhook

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// TestDialerRefusesAtConnectTime: the dialer's Control sees the resolved
// address, so loopback by name, by IPv4, by IPv6 and by IPv4-mapped IPv6,
// and the metadata address, are refused before any packet leaves; with
// the operator's allowance loopback is reached.
func TestDialerRefusesAtConnectTime(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	d := &net.Dialer{Timeout: time.Second, Control: dialControl(false)}
	for _, addr := range []string{"localhost:" + port, "127.0.0.1:" + port, "[::1]:" + port, "[::ffff:127.0.0.1]:" + port,
		"169.254.169.254:80", "0.0.0.0:" + port} {
		c, err := d.DialContext(context.Background(), "tcp", addr)
		if err == nil {
			c.Close()
			t.Errorf("dial %s succeeded", addr)
			continue
		}
		if !strings.Contains(err.Error(), "refused: ") {
			t.Errorf("dial %s: %v, want the guard's refusal", addr, err)
		}
	}
	allowed := &net.Dialer{Timeout: time.Second, Control: dialControl(true)}
	c, err := allowed.DialContext(context.Background(), "tcp", "localhost:"+port)
	if err != nil {
		t.Fatalf("with private addresses allowed: %v", err)
	}
	c.Close()
}

func TestRefusedAddr(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"127.0.0.1", "::1", "10.0.0.1", "172.16.5.4", "192.168.1.1", "169.254.169.254", "fd00:ec2::254",
		"fe80::1", "::ffff:10.0.0.1", "100.64.0.1", "0.0.0.0", "::", "224.0.0.1", "192.0.0.192"} {
		if refusedAddr(netip.MustParseAddr(s)) == "" {
			t.Errorf("%s is not refused", s)
		}
	}
	for _, s := range []string{"93.184.215.14", "1.1.1.1", "2606:4700:4700::1111"} {
		if why := refusedAddr(netip.MustParseAddr(s)); why != "" {
			t.Errorf("%s refused: %s", s, why)
		}
	}
}
