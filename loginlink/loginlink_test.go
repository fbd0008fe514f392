package loginlink_test

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/loginlink"
	"github.com/desk-runtime/desk/store/postgres"
	"github.com/desk-runtime/desk/store/postgres/pgtest"
	"github.com/desk-runtime/desk/store/sqlite"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func sqliteStore(t *testing.T) desk.Store {
	s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "desk.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func redeem(t *testing.T, c *loginlink.Codes, code string) (string, bool) {
	t.Helper()
	tok, ok, err := c.Redeem(context.Background(), code)
	if err != nil {
		t.Fatal(err)
	}
	return tok, ok
}

func issue(t *testing.T, c *loginlink.Codes) (string, time.Time) {
	t.Helper()
	code, exp, err := c.Issue(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return code, exp
}

func TestCodeWorksOnceAndExpires(t *testing.T) {
	t.Parallel()
	clk := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	c := loginlink.New(sqliteStore(t), "deskadm_secret", 10*time.Minute, clk.now)
	code, exp := issue(t, c)
	if !strings.HasPrefix(code, loginlink.Prefix) || len(code)-len(loginlink.Prefix) < 52 {
		t.Fatalf("code %q: want %s and 256 bits of base32", code, loginlink.Prefix)
	}
	if !exp.Equal(clk.now().Add(10 * time.Minute)) {
		t.Fatalf("expires %v", exp)
	}
	if other, _ := issue(t, c); other == code {
		t.Fatal("two codes are equal")
	}
	if tok, ok := redeem(t, c, code); !ok || tok != "deskadm_secret" {
		t.Fatalf("first redeem = %q %v", tok, ok)
	}
	if _, ok := redeem(t, c, code); ok {
		t.Fatal("a code worked twice")
	}
	if _, ok := redeem(t, c, loginlink.Prefix+"unknown"); ok {
		t.Fatal("an unknown code worked")
	}
	if _, ok := redeem(t, c, ""); ok {
		t.Fatal("an empty code worked")
	}

	late, _ := issue(t, c)
	clk.add(10*time.Minute - time.Second)
	soon, _ := issue(t, c)
	clk.add(time.Second)
	if _, ok := redeem(t, c, late); ok {
		t.Fatal("an expired code worked")
	}
	if _, ok := redeem(t, c, soon); !ok {
		t.Fatal("a code within its ttl did not work")
	}
}

func TestLiveCodesAreBounded(t *testing.T) {
	t.Parallel()
	clk := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	c := loginlink.New(sqliteStore(t), "tok", 0, clk.now)
	first, _ := issue(t, c)
	var live []string
	for range loginlink.MaxLive {
		clk.add(time.Millisecond)
		code, _ := issue(t, c)
		live = append(live, code)
	}
	if _, ok := redeem(t, c, first); ok {
		t.Fatal("the oldest code survived past the bound")
	}
	for _, code := range live {
		if _, ok := redeem(t, c, code); !ok {
			t.Fatal("a code within the bound was dropped")
		}
	}
}

// TestOtherTokenRefused: a node whose admin token differs from the issuing
// node's does not sign a browser in with its own token, and the code is
// spent all the same.
func TestOtherTokenRefused(t *testing.T) {
	t.Parallel()
	s := sqliteStore(t)
	a := loginlink.New(s, "token-a", 0, nil)
	b := loginlink.New(s, "token-b", 0, nil)
	code, _ := issue(t, a)
	if tok, ok := redeem(t, b, code); ok {
		t.Fatalf("node b signed in with %q for a's link", tok)
	}
	if _, ok := redeem(t, a, code); ok {
		t.Fatal("a spent code worked on its own node")
	}
}

// TestRedeemRaceAcrossNodes: two nodes (two connections to one Postgres
// database) redeem the same code at once, many times; exactly one wins
// each code.
func TestRedeemRaceAcrossNodes(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	var nodes [2]*loginlink.Codes
	for i := range nodes {
		s, err := postgres.Open(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		nodes[i] = loginlink.New(s, "tok", 0, nil)
	}
	for range 20 {
		code, _ := issue(t, nodes[0])
		var wins sync.WaitGroup
		results := make(chan bool, 4)
		start := make(chan struct{})
		for i := range 4 {
			wins.Go(func() {
				<-start
				_, ok, err := nodes[i%2].Redeem(context.Background(), code)
				if err != nil {
					t.Error(err)
				}
				results <- ok
			})
		}
		close(start)
		wins.Wait()
		close(results)
		n := 0
		for ok := range results {
			if ok {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("a code was redeemed %d times by racing nodes, want exactly 1", n)
		}
	}
}
