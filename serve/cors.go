package serve

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// cors answers browsers' cross-origin requests as vLLM's server does (Starlette's CORS
// middleware with vLLM's defaults: every method and header, no credentials): a page from an
// allowed origin may call the API and read the reply; a preflight from another origin gets 400.
// Immutable after newCORS.
type cors struct {
	all     bool            // "*": any origin
	origins map[string]bool // else these, as browsers send Origin (scheme://host[:port])
}

// corsMaxAge is how long a browser may keep a preflight's answer, in seconds (Starlette's).
const corsMaxAge = "600"

// corsMethods are what allow_methods ["*"] stands for in Starlette (its ALL_METHODS): a
// preflight names them, and one asking for another (case counts) is refused.
const corsMethods = "DELETE, GET, HEAD, OPTIONS, PATCH, POST, PUT"

// newCORS checks origins: "*", or origins of the form a browser sends. None: nil (no CORS).
func newCORS(origins []string) (*cors, error) {
	if len(origins) == 0 {
		return nil, nil
	}
	c := &cors{origins: map[string]bool{}}
	for _, o := range origins {
		canon, err := CheckOrigin(o)
		if err != nil {
			return nil, err
		}
		if canon == "*" {
			c.all = true
		}
		c.origins[canon] = true
	}
	return c, nil
}

// CheckOrigin checks an allowed origin: "*", or scheme://host[:port], or "null", which a page
// from a file sends. It returns the origin as a browser sends it in Origin, which is what it is
// compared with: scheme and host in lower case, no default port (:80, :443), no trailing slash.
func CheckOrigin(o string) (string, error) {
	if o == "*" || o == "null" {
		return o, nil
	}
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(o, "?") || strings.HasSuffix(o, "#") {
		return "", fmt.Errorf("%w: allowed origin %q: want * or scheme://host[:port], e.g. http://localhost:3000", ErrBadOptions, o)
	}
	host := strings.ToLower(u.Host)
	if p := u.Port(); (u.Scheme == "http" && p == "80") || (u.Scheme == "https" && p == "443") {
		host = strings.ToLower(u.Hostname())
		if strings.Contains(host, ":") { // an IPv6 literal keeps its brackets
			host = "[" + host + "]"
		}
	}
	return u.Scheme + "://" + host, nil
}

// allows reports whether a page from origin may call the API.
func (c *cors) allows(origin string) bool { return c.all || c.origins[origin] }

// preflight answers r if it is a CORS preflight (OPTIONS with Origin and
// Access-Control-Request-Method, even empty ones) and reports whether it did, as Starlette's:
// 400 naming what is refused (the origin, the method, a private-network request, which vLLM
// does not allow), else 200; either way with the methods, the asked headers and the max age. A
// nil cors answers none.
func (c *cors) preflight(w http.ResponseWriter, r *http.Request) bool {
	origin, isCORS := header(r, "Origin")
	method, isPreflight := header(r, "Access-Control-Request-Method")
	if c == nil || r.Method != http.MethodOptions || !isCORS || !isPreflight {
		return false
	}
	h := w.Header()
	var refused []string
	switch {
	case !c.allows(origin):
		refused = append(refused, "origin")
		h.Set("Vary", "Origin")
	case c.all:
		h.Set("Access-Control-Allow-Origin", "*")
	default:
		h.Set("Access-Control-Allow-Origin", origin)
		h.Set("Vary", "Origin")
	}
	if !slices.Contains(strings.Split(corsMethods, ", "), method) {
		refused = append(refused, "method")
	}
	if _, ok := header(r, "Access-Control-Request-Private-Network"); ok {
		refused = append(refused, "private-network")
	}
	h.Set("Access-Control-Allow-Methods", corsMethods)
	h.Set("Access-Control-Max-Age", corsMaxAge)
	if req, ok := header(r, "Access-Control-Request-Headers"); ok {
		h.Set("Access-Control-Allow-Headers", req) // every header is allowed: the ones asked for
	}
	h.Set("Content-Type", "text/plain; charset=utf-8")
	if len(refused) > 0 {
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, "Disallowed CORS "+strings.Join(refused, ", "))
		return true
	}
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, "OK")
	return true
}

// annotate lets the page that sent r (from an allowed origin) read the reply: "*" for any
// origin (with cookies too, as Starlette 1.x: vLLM allows no credentials), else the origin
// itself, and the reply varies with it. A nil cors adds nothing.
func (c *cors) annotate(w http.ResponseWriter, r *http.Request) {
	origin, ok := header(r, "Origin")
	switch {
	case c == nil || !ok:
	case c.all:
		w.Header().Set("Access-Control-Allow-Origin", "*")
	case c.allows(origin):
		w.Header().Set("Access-Control-Allow-Origin", origin)
		w.Header().Add("Vary", "Origin")
	}
}

// header is r's first value of the header key (canonical) and whether r has it at all: as in
// Starlette, an empty header counts.
func header(r *http.Request, key string) (string, bool) {
	if v := r.Header[key]; len(v) > 0 {
		return v[0], true
	}
	return "", false
}
