package loginlink

import (
	"strings"
	"testing"
	"time"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func TestCodeWorksOnceAndExpires(t *testing.T) {
	clk := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	c := New("deskadm_secret", 10*time.Minute, clk.now)
	code, exp := c.Issue()
	if !strings.HasPrefix(code, Prefix) || len(code)-len(Prefix) < 52 {
		t.Fatalf("code %q: want %s and 256 bits of base32", code, Prefix)
	}
	if !exp.Equal(clk.t.Add(10 * time.Minute)) {
		t.Fatalf("expires %v", exp)
	}
	if other, _ := c.Issue(); other == code {
		t.Fatal("two codes are equal")
	}
	if tok, ok := c.Redeem(code); !ok || tok != "deskadm_secret" {
		t.Fatalf("first redeem = %q %v", tok, ok)
	}
	if _, ok := c.Redeem(code); ok {
		t.Fatal("a code worked twice")
	}
	if _, ok := c.Redeem(Prefix + "unknown"); ok {
		t.Fatal("an unknown code worked")
	}
	if _, ok := c.Redeem(""); ok {
		t.Fatal("an empty code worked")
	}

	late, _ := c.Issue()
	clk.t = clk.t.Add(10*time.Minute - time.Second)
	soon, _ := c.Issue()
	clk.t = clk.t.Add(time.Second)
	if _, ok := c.Redeem(late); ok {
		t.Fatal("an expired code worked")
	}
	if _, ok := c.Redeem(soon); !ok {
		t.Fatal("a code within its ttl did not work")
	}
}

func TestLiveCodesAreBounded(t *testing.T) {
	c := New("tok", 0, nil)
	first, _ := c.Issue()
	var last string
	for range MaxLive {
		last, _ = c.Issue()
	}
	if n := len(c.live); n != MaxLive {
		t.Fatalf("%d live codes, want %d", n, MaxLive)
	}
	if _, ok := c.Redeem(first); ok {
		t.Fatal("the oldest code survived past the bound")
	}
	if _, ok := c.Redeem(last); !ok {
		t.Fatal("the newest code was dropped")
	}
}
