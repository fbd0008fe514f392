package search

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestSearXNG(t *testing.T) {
	var gotPath, gotQuery, gotFormat string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotPath, gotQuery, gotFormat = r.URL.Path, r.URL.Query().Get("q"), r.URL.Query().Get("format")
		w.Write([]byte(`{"results":[{"title":"Go","url":"https://go.dev","content":"The Go language"},{"title":"no url"},{"title":"B","url":"https://b.example","content":"b"},{"title":"C","url":"https://c.example"}]}`))
	}))
	defer srv.Close()
	s, err := NewSearXNG(srv.URL+"/searx/", nil)
	if err != nil {
		t.Fatal(err)
	}
	hits, err := s.Search(context.Background(), "golang & more", 2)
	if err != nil {
		t.Fatal(err)
	}
	if gotPath != "/searx/search" || gotQuery != "golang & more" || gotFormat != "json" {
		t.Fatalf("request = %s q=%q format=%q", gotPath, gotQuery, gotFormat)
	}
	if len(hits) != 2 || hits[0].URL != "https://go.dev" || hits[0].Snippet != "The Go language" || hits[1].URL != "https://b.example" {
		t.Fatalf("hits = %+v (a result without url must be skipped, limit kept)", hits)
	}
}

func TestSearXNGErrors(t *testing.T) {
	for _, bad := range []string{"", "ftp://x", "not a url", "http://"} {
		if _, err := NewSearXNG(bad, nil); err == nil || !strings.Contains(err.Error(), "DESK_SEARCH_URL") {
			t.Errorf("NewSearXNG(%q) = %v, want an error naming DESK_SEARCH_URL", bad, err)
		}
	}
	for _, c := range []struct {
		status int
		body   string
		want   string
	}{
		{403, "", "json format"},
		{500, "", "answered 500"},
		{200, "<html>", "not a SearXNG JSON answer"},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(c.status)
			w.Write([]byte(c.body))
		}))
		s, _ := NewSearXNG(srv.URL, nil)
		_, err := s.Search(context.Background(), "q", 5)
		srv.Close()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("status %d body %q: err = %v, want %q", c.status, c.body, err, c.want)
		}
	}
}
