package connlimit_test

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/desk-runtime/desk/connlimit"
	"github.com/desk-runtime/desk/internal/leaktest"
)

func TestMain(m *testing.M) { leaktest.Main(m) }

// serve accepts on l and keeps each connection open until its client
// closes it, like a server holding a slow request.
func serve(t *testing.T, l *connlimit.Listener) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(io.Discard, c)
			}()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		<-done
	})
}

func dial(t *testing.T, addr string, from net.IP) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: from}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// closedByPeer reports whether the server ended c without reading
// anything: the read ends (EOF or reset) before a generous liveness bound.
func closedByPeer(t *testing.T, c net.Conn) bool {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

// waitOpen waits until ip holds n connections in l.
func waitOpen(t *testing.T, l *connlimit.Listener, ip string, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for l.Open(ip) != n {
		if time.Now().After(deadline) {
			t.Fatalf("%s holds %d connections; want %d", ip, l.Open(ip), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestCapPerAddress: an address holding the cap has its next connection
// closed at once, loopback included; another address is not affected;
// a closed connection gives its place back.
func TestCapPerAddress(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := make(chan string, 10)
	l := connlimit.New(ln, 3, func(ip string, open int) { refused <- ip })
	serve(t, l)
	addr := ln.Addr().String()
	one, two := net.IPv4(127, 0, 0, 1), net.IPv4(127, 0, 0, 2)

	held := []net.Conn{dial(t, addr, one), dial(t, addr, one), dial(t, addr, one)}
	waitOpen(t, l, "127.0.0.1", 3)
	// Refused at once: the reset may even reach the dialer.
	if c, err := (&net.Dialer{LocalAddr: &net.TCPAddr{IP: one}}).Dial("tcp", addr); err == nil {
		defer c.Close()
		if !closedByPeer(t, c) {
			t.Fatal("the fourth connection of 127.0.0.1 was kept open")
		}
	}
	if ip := <-refused; ip != "127.0.0.1" {
		t.Fatalf("the refusal was reported for %q", ip)
	}
	// Another address has its own count.
	other := dial(t, addr, two)
	waitOpen(t, l, "127.0.0.2", 1)
	_ = other

	// A place given back is taken again.
	held[0].Close()
	waitOpen(t, l, "127.0.0.1", 2)
	dial(t, addr, one)
	waitOpen(t, l, "127.0.0.1", 3)
	if len(refused) != 0 {
		t.Fatalf("more refusals: %q", <-refused)
	}
}

// TestNoCap: a negative cap accepts every connection.
func TestNoCap(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := connlimit.New(ln, -1, func(string, int) { t.Error("refused under no cap") })
	accepted := make(chan struct{}, 100)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted <- struct{}{}
			defer c.Close()
		}
	}()
	for range 100 {
		dial(t, ln.Addr().String(), net.IPv4(127, 0, 0, 1))
	}
	for range 100 {
		<-accepted
	}
	l.Close()
	<-done
}
