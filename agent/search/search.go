// Package search owns desk's web search providers: what the acquire tool's
// "search" action calls. The one provider is SearXNG's JSON API, which
// operators commonly self-host and which needs no key; DESK_SEARCH_URL
// points at it. Without one, search answers NOT_CONFIGURED to the model.
package search

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/desk-runtime/desk/agent/tools"
)

// maxBody bounds a search response; a results page is a few kilobytes.
const maxBody = 4 << 20

// SearXNG searches through a SearXNG instance's JSON API
// (GET <base>/search?q=…&format=json). The instance must have the json
// format enabled in its settings (search.formats).
type SearXNG struct {
	base   *url.URL
	client *http.Client
}

// NewSearXNG checks the base URL. The operator chose it, so unlike the
// fetch tool it may be a private address (a SearXNG next to desk).
func NewSearXNG(base string, client *http.Client) (*SearXNG, error) {
	u, err := url.Parse(strings.TrimSpace(base))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("DESK_SEARCH_URL=%q must be an http(s) URL of a SearXNG instance", base)
	}
	if client == nil {
		client = &http.Client{Timeout: 20 * time.Second}
	}
	return &SearXNG{base: u, client: client}, nil
}

// Search returns up to limit hits.
func (s *SearXNG) Search(ctx context.Context, query string, limit int) ([]tools.SearchHit, error) {
	if limit <= 0 || limit > 20 {
		limit = 10
	}
	u := *s.base
	u.Path = strings.TrimSuffix(u.Path, "/") + "/search"
	u.RawQuery = url.Values{"q": {query}, "format": {"json"}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("search provider: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		return nil, fmt.Errorf("search provider: %w", err)
	}
	if len(body) > maxBody {
		return nil, fmt.Errorf("search provider: response larger than %d bytes", maxBody)
	}
	if resp.StatusCode == http.StatusForbidden {
		return nil, fmt.Errorf("search provider answered 403: enable the json format in the SearXNG settings (search.formats)")
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("search provider answered %d", resp.StatusCode)
	}
	var page struct {
		Results []struct {
			Title   string `json:"title"`
			URL     string `json:"url"`
			Content string `json:"content"`
		} `json:"results"`
	}
	if err := json.Unmarshal(body, &page); err != nil {
		return nil, fmt.Errorf("search provider: not a SearXNG JSON answer: %v", err)
	}
	hits := make([]tools.SearchHit, 0, min(limit, len(page.Results)))
	for _, r := range page.Results {
		if len(hits) == limit {
			break
		}
		if r.URL == "" {
			continue
		}
		hits = append(hits, tools.SearchHit{Title: r.Title, URL: r.URL, Snippet: r.Content})
	}
	return hits, nil
}
