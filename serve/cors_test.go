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
// page is answered 200 with Starlette's methods, the asked headers and a max age; the POST's
// reply lets the page read it, and so does a GET with cookies; a request without Origin gets no
// CORS header; an OPTIONS that is no preflight is still 405.
func TestCORSAnyOrigin(t *testing.T) {
	h := newHarness(t, engineOpts{}, Options{AllowedOrigins: []string{"*"}})
	status, hdr, body := corsDo(t, h, http.MethodOptions, "/v1/chat/completions", "", map[string]string{
		"Origin": "http://localhost:3000", "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization, content-type"})
	if status != http.StatusOK || body != "OK" || hdr.Get("Access-Control-Allow-Origin") != "*" ||
		hdr.Get("Access-Control-Allow-Methods") != "DELETE, GET, HEAD, OPTIONS, PATCH, POST, PUT" || hdr.Get("Access-Control-Allow-Headers") != "authorization, content-type" ||
		hdr.Get("Access-Control-Max-Age") != "600" {
		t.Errorf("preflight: %d %q %v", status, body, hdr)
	}
	status, hdr, body = corsDo(t, h, http.MethodPost, "/v1/completions", fmt.Sprintf(`{"model":%q,"prompt":"Hi","max_tokens":2}`, h.srv.model.ID),
		map[string]string{"Origin": "http://localhost:3000", "Content-Type": "application/json"})
	if status != http.StatusOK || hdr.Get("Access-Control-Allow-Origin") != "*" || !strings.Contains(body, `"text_completion"`) {
		t.Errorf("POST from a page: %d %v %s", status, hdr, body)
	}
	if _, hdr, _ = corsDo(t, h, http.MethodGet, "/v1/models", "", map[string]string{"Origin": "http://a.example", "Cookie": "s=1"}); hdr.Get("Access-Control-Allow-Origin") != "*" || hdr.Get("Vary") != "" {
		t.Errorf("with cookies, still * (Starlette 1.x without credentials): %v", hdr)
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

// TestCORSOriginsAsBrowsersSendThem: an allowed origin written with capitals, a default port or a
// trailing slash is the Origin a browser sends for it (lower case, no default port), so that it
// matches; other ports stay.
func TestCORSOriginsAsBrowsersSendThem(t *testing.T) {
	for in, want := range map[string]string{
		"HTTP://LocalHost:3000": "http://localhost:3000", "https://a.example:443/": "https://a.example", "http://a.example:80": "http://a.example",
		"http://a.example:443": "http://a.example:443", "http://[::1]:80": "http://[::1]", "http://[::1]:8080": "http://[::1]:8080",
	} {
		if got, err := CheckOrigin(in); err != nil || got != want {
			t.Errorf("CheckOrigin(%q) = %q, %v; want %q", in, got, err, want)
		}
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

// TestCORSPreflightRefused: a preflight is refused with 400 as Starlette's refuses it, naming
// each reason (an origin not listed, a method outside its list, case included, or none, a
// private-network request), with the headers of an accepted one but the origin's; the headers
// only need to be there, empty or not. A page from a file (Origin: null) may be listed.
func TestCORSPreflightRefused(t *testing.T) {
	star := newHarness(t, engineOpts{}, Options{AllowedOrigins: []string{"*"}})
	listed := newHarness(t, engineOpts{}, Options{AllowedOrigins: []string{"http://localhost:3000", "null"}})
	for _, tc := range []struct {
		name    string
		h       *harness
		headers map[string]string
		status  int
		body    string
		origin  string // Access-Control-Allow-Origin
		vary    string
	}{
		{"method", star, map[string]string{"Origin": "http://a.example", "Access-Control-Request-Method": "TRACE"}, 400, "Disallowed CORS method", "*", ""},
		{"lower-case method", star, map[string]string{"Origin": "http://a.example", "Access-Control-Request-Method": "post"}, 400, "Disallowed CORS method", "*", ""},
		{"empty method", star, map[string]string{"Origin": "http://a.example", "Access-Control-Request-Method": ""}, 400, "Disallowed CORS method", "*", ""},
		{"private network", star, map[string]string{"Origin": "http://a.example", "Access-Control-Request-Method": "PUT", "Access-Control-Request-Private-Network": "true"}, 400, "Disallowed CORS private-network", "*", ""},
		{"empty origin", star, map[string]string{"Origin": "", "Access-Control-Request-Method": "POST"}, 200, "OK", "*", ""},
		{"origin", listed, map[string]string{"Origin": "http://evil.example", "Access-Control-Request-Method": "POST"}, 400, "Disallowed CORS origin", "", "Origin"},
		{"origin and method", listed, map[string]string{"Origin": "http://evil.example", "Access-Control-Request-Method": "CONNECT"}, 400, "Disallowed CORS origin, method", "", "Origin"},
		{"null", listed, map[string]string{"Origin": "null", "Access-Control-Request-Method": "POST"}, 200, "OK", "null", "Origin"},
	} {
		tc.headers["Access-Control-Request-Headers"] = "content-type"
		status, hdr, body := corsDo(t, tc.h, http.MethodOptions, "/v1/completions", "", tc.headers)
		if status != tc.status || body != tc.body || hdr.Get("Access-Control-Allow-Origin") != tc.origin || strings.Join(hdr.Values("Vary"), ", ") != tc.vary ||
			hdr.Get("Access-Control-Allow-Methods") != "DELETE, GET, HEAD, OPTIONS, PATCH, POST, PUT" || hdr.Get("Access-Control-Allow-Headers") != "content-type" ||
			hdr.Get("Access-Control-Max-Age") != "600" {
			t.Errorf("%s: %d %q %v; want %d %q, Access-Control-Allow-Origin %q, Vary %q", tc.name, status, body, hdr, tc.status, tc.body, tc.origin, tc.vary)
		}
	}
	if _, hdr, _ := corsDo(t, star, http.MethodGet, "/v1/models", "", map[string]string{"Origin": ""}); hdr.Get("Access-Control-Allow-Origin") != "*" {
		t.Errorf("a GET with an empty Origin: %v; want * (an Origin header is there)", hdr)
	}
}
