package serve

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// corsDo sends method path with headers and returns the status, the reply's headers and body.
func corsDo(t *testing.T, h *harness, method, path, body string, headers map[string]string) (int, http.Header, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, h.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := h.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, string(b)
}

// TestCORSAnyOrigin: with "*" (vLLM's default), a browser's preflight for a JSON POST from any
// page is answered 200 with the methods, the asked headers and a max age; the POST's reply lets
// the page read it; a request without Origin gets no CORS header; an OPTIONS that is no
// preflight is still 405.
func TestCORSAnyOrigin(t *testing.T) {
	h := newHarness(t, engineOpts{}, Options{AllowedOrigins: []string{"*"}})
	status, hdr, body := corsDo(t, h, http.MethodOptions, "/v1/chat/completions", "", map[string]string{
		"Origin": "http://localhost:3000", "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization, content-type"})
	if status != http.StatusOK || body != "OK" || hdr.Get("Access-Control-Allow-Origin") != "*" ||
		hdr.Get("Access-Control-Allow-Methods") != "GET, HEAD, OPTIONS, POST" || hdr.Get("Access-Control-Allow-Headers") != "authorization, content-type" ||
		hdr.Get("Access-Control-Max-Age") != "600" {
		t.Errorf("preflight: %d %q %v", status, body, hdr)
	}
	status, hdr, body = corsDo(t, h, http.MethodPost, "/v1/completions", fmt.Sprintf(`{"model":%q,"prompt":"Hi","max_tokens":2}`, h.srv.model.ID),
		map[string]string{"Origin": "http://localhost:3000", "Content-Type": "application/json"})
	if status != http.StatusOK || hdr.Get("Access-Control-Allow-Origin") != "*" || !strings.Contains(body, `"text_completion"`) {
		t.Errorf("POST from a page: %d %v %s", status, hdr, body)
	}
	if _, hdr, _ = corsDo(t, h, http.MethodGet, "/v1/models", "", map[string]string{"Origin": "http://a.example", "Cookie": "s=1"}); hdr.Get("Access-Control-Allow-Origin") != "http://a.example" || hdr.Get("Vary") != "Origin" {
		t.Errorf("with cookies, the origin itself (a browser refuses *): %v", hdr)
	}
	if _, hdr, _ = corsDo(t, h, http.MethodGet, "/v1/models", "", nil); hdr.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("no Origin, yet %q", hdr.Get("Access-Control-Allow-Origin"))
	}
	if status, hdr, _ = corsDo(t, h, http.MethodOptions, "/v1/models", "", nil); status != http.StatusMethodNotAllowed || hdr.Get("Allow") != "GET, HEAD" {
		t.Errorf("OPTIONS without a preflight's headers: %d %v", status, hdr)
	}
}

// TestCORSListedOrigins: with a list, a listed origin is named back (the reply varies with the
// Origin); another origin's preflight is refused with 400 as vLLM's, and its requests carry no
// CORS header, so the browser keeps the reply from the page.
func TestCORSListedOrigins(t *testing.T) {
	h := newHarness(t, engineOpts{}, Options{AllowedOrigins: []string{"http://localhost:3000", "https://ui.example.com/"}})
	pre := func(origin string) (int, http.Header, string) {
		return corsDo(t, h, http.MethodOptions, "/v1/completions", "", map[string]string{"Origin": origin, "Access-Control-Request-Method": "POST"})
	}
	for _, o := range []string{"http://localhost:3000", "https://ui.example.com"} {
		if status, hdr, _ := pre(o); status != http.StatusOK || hdr.Get("Access-Control-Allow-Origin") != o || hdr.Get("Vary") != "Origin" {
			t.Errorf("preflight from %s: %d %v", o, status, hdr)
		}
	}
	if status, hdr, body := pre("http://evil.example"); status != http.StatusBadRequest || body != "Disallowed CORS origin" || hdr.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("preflight from another origin: %d %q %v", status, body, hdr)
	}
	if _, hdr, _ := corsDo(t, h, http.MethodGet, "/v1/models", "", map[string]string{"Origin": "http://evil.example"}); hdr.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("a GET from another origin is marked readable: %v", hdr)
	}
}

// TestCORSOff: without allowed origins (the library's default) nothing is added, and a preflight
// is an OPTIONS like any other: 405.
func TestCORSOff(t *testing.T) {
	h := newHarness(t, engineOpts{}, Options{})
	status, hdr, _ := corsDo(t, h, http.MethodOptions, "/v1/completions", "", map[string]string{"Origin": "http://localhost:3000", "Access-Control-Request-Method": "POST"})
	if status != http.StatusMethodNotAllowed || hdr.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("preflight with CORS off: %d %v", status, hdr)
	}
}

// TestCORSBadOrigins: New refuses an allowed origin no browser sends, naming it.
func TestCORSBadOrigins(t *testing.T) {
	te := newTestEngine(t, engineOpts{maxBatch: 1, maxSeqLen: 16})
	for _, o := range []string{"localhost:3000", "http://", "ftp://host", "http://host/app", "http://host?x=1", "http://user@host"} {
		if _, err := New(te, Options{AllowedOrigins: []string{o}}); !errors.Is(err, ErrBadOptions) || !strings.Contains(err.Error(), "allowed origin \""+o+"\"") {
			t.Errorf("%q: %v", o, err)
		}
	}
}
