package storetest

import (
	"sync"
	"testing"
	"time"

	"github.com/desk-runtime/desk"
)

// testLoginLinks covers the login links' codes: a code redeems once, not
// after it expired, the bound drops the oldest, and of racing redeemers
// exactly one wins.
func testLoginLinks(t *testing.T, s desk.Store) {
	t0 := desk.Now()
	wantCode(t, s.CreateLoginLink(ctx, "", "tok", t0, t0.Add(time.Minute), 4), desk.EINVALID)
	must(t, s.CreateLoginLink(ctx, "c1", "tok", t0, t0.Add(time.Minute), 4))
	wantCode(t, s.CreateLoginLink(ctx, "c1", "tok", t0, t0.Add(time.Minute), 4), desk.ECONFLICT)
	th, err := s.RedeemLoginLink(ctx, "c1", t0)
	must(t, err)
	if th != "tok" {
		t.Fatalf("token hash %q", th)
	}
	_, err = s.RedeemLoginLink(ctx, "c1", t0)
	wantCode(t, err, desk.ENOTFOUND)

	must(t, s.CreateLoginLink(ctx, "c2", "tok", t0, t0.Add(time.Minute), 4))
	_, err = s.RedeemLoginLink(ctx, "c2", t0.Add(time.Minute))
	wantCode(t, err, desk.ENOTFOUND)

	for i, c := range []string{"k0", "k1", "k2", "k3", "k4"} {
		must(t, s.CreateLoginLink(ctx, c, "tok", t0.Add(time.Duration(i)*time.Second), t0.Add(time.Hour), 4))
	}
	_, err = s.RedeemLoginLink(ctx, "k0", t0)
	wantCode(t, err, desk.ENOTFOUND)
	_, err = s.RedeemLoginLink(ctx, "k4", t0)
	must(t, err)

	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := 0
	for range 6 {
		wg.Go(func() {
			if _, err := s.RedeemLoginLink(ctx, "k3", t0); err == nil {
				mu.Lock()
				wins++
				mu.Unlock()
			} else if desk.ErrorCode(err) != desk.ENOTFOUND {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if wins != 1 {
		t.Fatalf("a code was redeemed %d times, want 1", wins)
	}
}
